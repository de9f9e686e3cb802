#!/usr/bin/env bash
# Speculative decoding on the GPU machine in one device call (issue 27): build parley with
# CUDA, then time every proposer on the trained target (and its draft) with `parley bench
# spec`, the grammar's forced drafts on the JSON tasks, prompt lookup on a copy-heavy set, and
# the cost of verify rows at the Llama-3.1-8B shape (`parley bench llm --verify-tokens`,
# synthetic weights). Run from the repository root with .deps/debs carried and the prompt files
# present (tools/train/data.py eval, see bench/RESULTS.md for the commands):
#   MIX=w/mix/eval.jsonl COPY=w/copy.jsonl JSON=w/json.jsonl TOKENIZER=w/qwen3 \
#     tools/device/spec_gpu.sh
# Environment: OUT=/tmp/out, BUILD_DIR=/tmp/build-gpu, DTYPES="bf16 f32", BATCHES="1 8 64",
#   STAGES="mix grammar copy disable overlap verify8b", DEADLINE=S (stages that would start later are skipped).
set -uo pipefail
OUT=${OUT:-/tmp/out}
DTYPES=${DTYPES:-bf16 f32}
BATCHES=${BATCHES:-1 8 64}
STAGES=${STAGES:-mix grammar copy disable overlap verify8b}
mkdir -p /tmp/models
source tools/device/lib.sh
T=models/parley-chat-target
D=models/parley-chat-draft
spec() {  # spec LABEL MODEL ARGS...: one bench spec run, its lines kept with the label
  local label=$1 model=$2; shift 2
  in_time "$label" || return
  "$P" bench spec -m "$model" --device cuda --batch $BATCHES "$@" 2>"$OUT/$label.err" |
    sed "s/^{/{\"run\":\"$label\",/" | tee -a "$OUT/spec.jsonl" |
    python3 -c 'import json,sys
for l in sys.stdin:
  j=json.loads(l)
  if j.get("bench")!="spec": continue
  print(j["run"],j["method"],"b",j["batch"],"tok/s %.0f"%j["tokens_per_s"],"s %.2f"%j["seconds"],
        "fwd",j["forwards"],"acc %.2f"%j["acceptance"],"same",j["identical_to_first_method"],"/",j["prompts"],
        "prefetched",j["prefetched_masks"],"mask wait %.3f"%j["mask_wait_seconds"])'
}
for dt in $DTYPES; do
  has mix && spec "mix_$dt" $T --dtype $dt --prompts "$MIX" --per-task \
    --methods none ngram suffix draft --draft-model $D --prompt-lookup-min 2
  has grammar && spec "json_$dt" $T --dtype $dt --prompts "$MIX" --grammar \
    --methods none forced ngram --prompt-lookup-min 2
  has copy && spec "copy_$dt" $T --dtype $dt --prompts "$COPY" --methods none ngram suffix \
    --prompt-lookup-min 2
done
# Prompt lookup with --speculative-disable-by-batch-size (drafts only while few decode).
has disable && spec disable_bf16 $T --dtype bf16 --prompts "$MIX" --methods none ngram \
  --prompt-lookup-min 2 --speculative-disable-by-batch-size ${DISABLE_AT:-4}
# Grammar masks beside the forward pass: a synthetic Qwen3-0.6B with Qwen3's tokenizer (151k
# ids; TOKENIZER holds its tokenizer.json and tokenizer_config.json), the JSON prompts under
# their schemas, masks computed in the sampler (off) and beside the forward (on).
if has overlap && in_time overlap; then
  s=qwen3-0.6b
  [[ -f /tmp/models/$s/model.safetensors ]] ||
    "$P" synth llm --shape $s --dtype bf16 -o /tmp/models/$s >/dev/null || echo "synth $s failed"
  cp "$TOKENIZER"/tokenizer.json "$TOKENIZER"/tokenizer_config.json /tmp/models/$s/
  for m in off on off on; do
    spec "overlap_$m" /tmp/models/$s --dtype bf16 --prompts "$JSON" --grammar --methods none forced \
      --max-tokens 64 --mask-overlap $m
  done
fi
if has verify8b && in_time verify8b; then
  s=llama-3.1-8b
  t0=$(date +%s)
  "$P" synth llm --shape $s --dtype bf16 -o /tmp/models/$s >/dev/null || echo "synth $s failed"
  echo "synth $s: $(($(date +%s) - t0)) s"
  "$P" bench llm -m /tmp/models/$s --device cuda --dtype bf16 --prompt-tokens 16 \
    --batch $BATCHES --verify-tokens 1 2 3 4 5 --decode-context 512 --decode-tokens 32 --runs 3 \
    2>&1 | tee -a "$OUT/verify8b.jsonl" | python3 -c 'import json,sys
for l in sys.stdin:
  try: j=json.loads(l)
  except Exception: print(l.rstrip()); continue
  if j.get("phase") in ("decode","verify"):
    print(j["phase"],"b",j["batch"],"w",j.get("tokens_per_row",1),"ms/step %.3f"%j["ms_per_step"])'
fi
nvidia-smi --query-gpu=name --format=csv,noheader
