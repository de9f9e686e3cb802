#!/usr/bin/env bash
# Trains parley's small chat model and its draft from scratch on one CUDA GPU (issue 24):
# held-out and training conversations, the BPE tokenizer, both models (trained at the same
# time on the one GPU), and the evaluation, within TOTAL_MINUTES of wall time.
#
#   tools/train/train.sh [OUT_DIR]        # OUT_DIR defaults to $OUT
#
# OUT_DIR receives only what is kept, in at most 8 flat files: models.tar.part-NN (15 MiB
# pieces of a tar of parley-chat-target/ and parley-chat-draft/, each in the Hugging Face
# layout: config.json, model.safetensors bf16, generation_config.json, tokenizer.json,
# tokenizer_config.json, train_log.json; `cat models.tar.part-* | tar -x` unpacks them),
# SHA256SUMS of those files, eval.json, data_manifest.json and train.log. Intermediate files
# stay in $WORK (default: a fresh folder under /tmp). Settings (environment): PYTHON (python3),
# SEED (1), EVAL_SEED (2), COUNT (training conversations, 600000), PER_TASK (held-out turns
# per task, 100), TOTAL_MINUTES (8), TARGET_SIZE (target), DRAFT_SIZE (draft); DATA_PYTHON
# (PYTHON) runs data.py and tokenizer.py; TRAIN_MINUTES fixes each training run's budget
# (default: what TOTAL_MINUTES leaves); SMOKE=1 runs the pipeline on CPU at toy sizes;
# REUSE_WORK=1 with WORK of an earlier run skips the data, tokenizer and preflight steps, and
# ONLY=target trains the target alone, keeping WORK's draft.
set -euo pipefail

OUT_DIR="${1:-${OUT:-}}"
if [ -z "$OUT_DIR" ]; then
  echo "usage: tools/train/train.sh OUT_DIR   (or set \$OUT)" >&2
  exit 2
fi
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"
DATA_PY="${DATA_PYTHON:-$PY}"
SEED="${SEED:-1}"
EVAL_SEED="${EVAL_SEED:-2}"
COUNT="${COUNT:-600000}"
PER_TASK="${PER_TASK:-100}"
TOTAL_MINUTES="${TOTAL_MINUTES:-8}"
TARGET_SIZE="${TARGET_SIZE:-target}"
DRAFT_SIZE="${DRAFT_SIZE:-draft}"
WORK="${WORK:-$(mktemp -d /tmp/parley-train.XXXXXX)}"
EVAL_RESERVE_S=75 # what evaluation and copying need after training
export PYTHONUNBUFFERED=1 # progress lines as they happen, not when a pipe's buffer fills
mkdir -p "$OUT_DIR" "$WORK"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
LOG="$OUT_DIR/train.log"
: >"$LOG"
say() { echo "[train.sh +${SECONDS}s] $*" | tee -a "$LOG"; }
run() { "$@" 2>&1 | tee -a "$LOG"; }

say "output $OUT_DIR, work $WORK, seed $SEED, $COUNT conversations, budget $TOTAL_MINUTES min"
# check PYTHON ROLE: data needs jinja2, tokenizers and numpy; train tokenizers, numpy, torch,
# transformers (with Qwen3ForCausalLM unless SMOKE) and safetensors.
check() {
  "$1" - "$2" "${SMOKE:-0}" <<'EOF'
import importlib, sys
role, smoke = sys.argv[1], sys.argv[2] == "1"
names = ["tokenizers", "numpy"] + (["torch", "transformers", "safetensors"] if role == "train" else ["jinja2"])
missing = []
for name in names:
    try:
        importlib.import_module(name)
    except Exception as e:
        missing.append("%s (%s)" % (name, e))
if missing:
    print("[train.sh] %s: missing Python packages: %s" % (sys.executable, ", ".join(missing)))
    sys.exit(1)
if role == "train":
    import torch, transformers, tokenizers
    if not smoke and not hasattr(transformers, "Qwen3ForCausalLM"):
        print("[train.sh] transformers %s has no Qwen3ForCausalLM" % transformers.__version__)
        sys.exit(1)
    cuda = torch.cuda.is_available()
    print("[train.sh] python %s, torch %s, transformers %s, tokenizers %s, cuda %s%s" % (
        sys.version.split()[0], torch.__version__, transformers.__version__, tokenizers.__version__,
        cuda, (" (" + torch.cuda.get_device_name(0) + ")") if cuda else ""))
    if not cuda and not smoke:
        print("[train.sh] warning: no CUDA device; training will be slow")
EOF
}
if ! check "$DATA_PY" data 2>&1 | tee -a "$LOG" || ! check "$PY" train 2>&1 | tee -a "$LOG"; then
  say "package check failed"
  exit 1
fi
smoke_train=()
smoke_eval=()
if [ "${SMOKE:-0}" = "1" ]; then
  # A CPU run of the whole pipeline at toy sizes (Qwen2 stands in for Qwen3 on old transformers).
  smoke_train=(--smoke --arch qwen2)
  smoke_eval=(--limit 2)
fi

# REUSE_WORK=1: WORK already holds the data, tokenizer and ids of an earlier run (same seeds).
if [ "${REUSE_WORK:-0}" != "1" ]; then
say "1/5 data: held-out prompts (seed $EVAL_SEED) and training conversations (seed $SEED)"
run "$DATA_PY" "$HERE/data.py" eval --seed "$EVAL_SEED" --per-task "$PER_TASK" --out "$WORK"
run "$DATA_PY" "$HERE/data.py" train --seed "$SEED" --count "$COUNT" --exclude "$WORK/eval.jsonl" --out "$WORK"

say "2/5 tokenizer: byte-level BPE, then the token ids and loss mask"
run "$DATA_PY" "$HERE/tokenizer.py" train --data "$WORK/train.jsonl" --out "$WORK/tokenizer"
run "$DATA_PY" "$HERE/tokenizer.py" encode --data "$WORK/train.jsonl" --tokenizer "$WORK/tokenizer" \
  --out "$WORK/train_tokens.npz"
fi

"$DATA_PY" - "$WORK" "$SEED" "$EVAL_SEED" "$COUNT" "$HERE" >"$OUT_DIR/data_manifest.json" <<'EOF'
import hashlib, json, subprocess, sys
work, seed, eval_seed, count, here = sys.argv[1:]
def sha(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()
prose = json.loads(subprocess.check_output([sys.executable, here + "/data.py", "prose-source"]))
print(json.dumps({"seed": int(seed), "eval_seed": int(eval_seed), "count": int(count), "python": sys.version.split()[0],
                  "prose": prose, "train_jsonl_sha256": sha(work + "/train.jsonl"),
                  "eval_jsonl_sha256": sha(work + "/eval.jsonl"),
                  "tokenizer_json_sha256": sha(work + "/tokenizer/tokenizer.json")}, indent=1))
EOF

if [ "${SMOKE:-0}" != "1" ] && [ "${REUSE_WORK:-0}" != "1" ]; then
  # A few steps of a toy model, saved and evaluated, run every GPU code path first: an API
  # mismatch costs seconds here rather than the whole training run.
  say "preflight: a tiny model, 3 steps, save and evaluation"
  run "$PY" "$HERE/train.py" --data "$WORK/train_tokens.npz" --tokenizer "$WORK/tokenizer" \
    --out "$WORK/preflight" --size tiny --steps 3 --batch-tokens 16384 --minutes 2 --log-every 1
  run "$PY" "$HERE/eval.py" --eval "$WORK/eval.jsonl" --target "$WORK/preflight" \
    --draft "$WORK/preflight" --out "$WORK/preflight_eval.json" --limit 1
fi

left_s=$((TOTAL_MINUTES * 60 - SECONDS - EVAL_RESERVE_S))
if [ "$left_s" -lt 60 ]; then
  say "only ${left_s}s left for training; raise TOTAL_MINUTES or lower COUNT"
  exit 1
fi
minutes="${TRAIN_MINUTES:-$(awk -v s="$left_s" 'BEGIN { printf "%.2f", s / 60 }')}"
say "3/5 training $TARGET_SIZE and $DRAFT_SIZE side by side, $minutes min each"
# Each run's lines go, prefixed, to the console and train.log as they come (so a run cut
# short still leaves its progress); pipefail makes the subshell report train.py's status.
train_one() { # NAME SIZE SEED
  (
    set -o pipefail
    "$PY" "$HERE/train.py" --data "$WORK/train_tokens.npz" --tokenizer "$WORK/tokenizer" \
      --out "$WORK/parley-chat-$1" --size "$2" --minutes "$minutes" --seed "$3" "${smoke_train[@]}" 2>&1 |
      sed -u "s/^/[$1] /" | tee -a "$LOG"
  )
}
train_one target "$TARGET_SIZE" "$SEED" &
target_pid=$!
status=0
# ONLY=target retrains the target alone (the draft of WORK is kept).
if [ "${ONLY:-}" != "target" ]; then
  train_one draft "$DRAFT_SIZE" "$((SEED + 1))" &
  draft_pid=$!
  wait "$draft_pid" || status=2
fi
wait "$target_pid" || status=$((status + 1))
if [ "$status" -ne 0 ]; then
  say "training failed (status $status: 1 = target, 2 = draft, 3 = both); logs above"
  exit 1
fi
# What comes back from the GPU machine is limited (8 files of at most 16 MiB), so both model
# folders travel as one tar split into 15 MiB parts; SHA256SUMS lists the files inside.
(cd "$WORK" && sha256sum parley-chat-target/* parley-chat-draft/*) >"$OUT_DIR/SHA256SUMS"
rm -f "$OUT_DIR"/models.tar.part-*
tar -C "$WORK" -cf - parley-chat-target parley-chat-draft | split -b 15M -d -a 2 - "$OUT_DIR/models.tar.part-"
say "models: $(ls "$OUT_DIR"/models.tar.part-* | wc -l) parts; unpack with: cat models.tar.part-* | tar -x"

say "4/5 evaluation on the held-out prompts"
run "$PY" "$HERE/eval.py" --eval "$WORK/eval.jsonl" --target "$WORK/parley-chat-target" \
  --draft "$WORK/parley-chat-draft" --out "$OUT_DIR/eval.json" "${smoke_eval[@]}"

say "5/5 done: $(du -sh "$OUT_DIR" | cut -f1) in $OUT_DIR"
ls -l "$OUT_DIR" | tee -a "$LOG"
