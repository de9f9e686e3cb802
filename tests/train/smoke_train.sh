#!/bin/sh
# Runs tools/train/train.sh end to end on CPU at toy sizes (SMOKE=1: Qwen2 under .venv-ref's
# torch 1.13 + transformers 4.48 stands in for Qwen3) and checks what it leaves in OUT_DIR:
# at most 8 files (what the GPU machine returns), the split tar unpacking to both model
# folders in the Hugging Face layout with matching SHA256SUMS, and an eval.json covering
# every task with the speculative-decoding numbers. Catches data, batching, loss, save and eval bugs.
#
#   smoke_train.sh REF_PYTHON LLM_PYTHON      (exit 77 = skipped: a venv is missing)
set -eu
ref="$1"
llm="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
[ -x "$ref" ] && "$ref" -c 'import torch, transformers, safetensors' 2>/dev/null ||
  { echo "SKIP: needs $ref with torch and transformers: run scripts/setup_reference.sh"; exit 77; }
[ -x "$llm" ] && "$llm" -c 'import jinja2, tokenizers, numpy' 2>/dev/null ||
  { echo "SKIP: needs $llm with jinja2 and tokenizers: run scripts/setup_llm_reference.sh"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
SMOKE=1 PYTHON="$ref" DATA_PYTHON="$llm" COUNT=1500 PER_TASK=2 WORK="$tmp/work" \
  "$root/tools/train/train.sh" "$tmp/out" >"$tmp/log" 2>&1 || { cat "$tmp/log"; echo "FAIL: train.sh"; exit 1; }
n_files="$(find "$tmp/out" -type f | wc -l)"
[ "$n_files" -le 8 ] || { echo "FAIL: $n_files files in OUT_DIR (at most 8 come back)"; exit 1; }
mkdir "$tmp/models"
cat "$tmp/out"/models.tar.part-* | tar -x -C "$tmp/models"
(cd "$tmp/models" && sha256sum -c --quiet "$tmp/out/SHA256SUMS") || { echo "FAIL: SHA256SUMS"; exit 1; }
"$llm" - "$tmp/out" "$tmp/models" <<'PY'
import json, os, sys
out, models = sys.argv[1], sys.argv[2]
for m in ("parley-chat-target", "parley-chat-draft"):
    for f in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "train_log.json"):
        if not os.path.isfile(os.path.join(models, m, f)):
            sys.exit("FAIL: %s/%s missing" % (m, f))
    log = json.load(open(os.path.join(models, m, "train_log.json")))
    if log["steps"] < 1 or not log["points"]:
        sys.exit("FAIL: %s trained no steps" % m)
    gen = json.load(open(os.path.join(models, m, "generation_config.json")))
    tok = json.load(open(os.path.join(models, m, "tokenizer.json")))
    ids = {t["content"]: t["id"] for t in tok["added_tokens"]}
    if gen["eos_token_id"] != [ids["<|im_end|>"], ids["<|endoftext|>"]]:
        sys.exit("FAIL: generation_config eos %r" % gen["eos_token_id"])
ev = json.load(open(os.path.join(out, "eval.json")))
tasks = ["add3", "add", "sub", "mul", "arith_chain", "copy", "quote", "sort", "count", "recall", "json", "tool_call", "tool_answer", "prose"]
for side in ("target", "draft"):
    if sorted(ev[side]) != sorted(tasks):
        sys.exit("FAIL: eval.json %s tasks %s" % (side, sorted(ev[side])))
sp = ev["speculative"]
if not (0.0 <= sp["acceptance"] <= 1.0 and sp["tokens_per_round"] >= 1.0 and sp["target_self_agreement"] > 0.9):
    sys.exit("FAIL: speculative %r" % sp)
for f in ("data_manifest.json", "train.log", "SHA256SUMS"):
    if not os.path.isfile(os.path.join(out, f)):
        sys.exit("FAIL: %s missing" % f)
print("smoke train: both models saved, eval.json complete, acceptance %.3f" % sp["acceptance"])
PY
