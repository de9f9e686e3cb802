#!/usr/bin/env bash
# The chat engine on the GPU machine in one device call (issue 23): build parley with CUDA,
# run the op suites and the CUDA chat tests, then benchmark synthetic checkpoints at real
# shapes beside the anchors. Run from the repository root, with .deps carried (debs/ from
# fetch_debs.sh; llamacpp/llama.cpp-src.tar.gz for the llama.cpp anchor, see below):
#   STAGES="test bench" tools/device/llm_gpu.sh
# Stages (default "test bench"):
#   test      build (test_ops, test_unit, test_llm, parley), run test_ops, test_unit and
#             test_llm's CUDA tests (CudaLlm.*, Tiny/CudaForward.*); QUICK=1 builds parley and
#             test_llm alone and runs only the latter
#   bench     for each of $SHAPES: parley synth llm (bf16), parley bench llm on CUDA, and
#             tools/device/llm_transformers_bench.py on the same folder (one after the other)
#   llamacpp-build  starts the llama.cpp build in the background: the source of the pinned
#             llama-cpp-python 0.3.36 sdist (vendor/llama.cpp), trimmed to
#             .deps/llamacpp/llama.cpp-src.tar.gz (its CMake tree, ggml with the CPU and CUDA
#             backends, src, common, tools, vendor, gguf-py), with CUDA for sm_90
#   profile   ncu per-kernel times of two decode steps (PROFILE_SHAPE, PROFILE_BATCHES)
#   llamacpp  waits for that build, writes the same synthetic folders as BF16 GGUF
#             (tools/device/llm_synth_gguf.py with its gguf-py) and runs llama-bench
# Environment: OUT=/tmp/out (logs, JSON lines), BUILD_DIR=/tmp/build-gpu,
#   SHAPES="qwen3-0.6b llama-3.2-1b llama-3.1-8b", PROMPTS="512 4096", BATCHES="1 8 64",
#   CONTEXT=512 (decode context), STEPS=32 (timed decode steps), RUNS=3.
set -uo pipefail
OUT=${OUT:-/tmp/out}
STAGES=${STAGES:-test bench}
SHAPES=${SHAPES:-qwen3-0.6b llama-3.2-1b llama-3.1-8b}
PROMPTS=${PROMPTS:-512 4096}
BATCHES=${BATCHES:-1 8 64}
CONTEXT=${CONTEXT:-512}
STEPS=${STEPS:-32}
RUNS=${RUNS:-3}
export PATH="/usr/local/cuda/bin:$PATH"
mkdir -p "$OUT" /tmp/deps /tmp/models
for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
export PARLEY_DEPS_PREFIX=/tmp/deps BUILD_DIR=${BUILD_DIR:-/tmp/build-gpu}
export PARLEY_CLI=ON PARLEY_TARGETS="parley test_llm"
arch_lib="/tmp/deps/usr/lib/$(gcc -print-multiarch)"
P=$BUILD_DIR/parley
has() { [[ " $STAGES " == *" $1 "* ]]; }
# DEADLINE=S: steps that would start S seconds after the call began are skipped (so that
# what ran comes back before the device tool's limit).
T_START=$(date +%s)
in_time() { (( $(date +%s) - T_START < ${DEADLINE:-100000} )) || { echo "skipped (deadline): $*"; return 1; }; }

# llama.cpp builds in the background while parley builds (a warm machine is given back 30 s
# after a call, so every call builds what it needs).
L=/tmp/llamacpp
if has llamacpp && [[ ! -f $L/build.done ]]; then
  mkdir -p $L && tar xzf .deps/llamacpp/llama.cpp-src.tar.gz -C $L
  (t0=$(date +%s)
   cmake -S $L -B $L/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
     -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF &&
     ninja -C $L/build -j${LLAMA_JOBS:-12} llama-bench llama-batched-bench
   echo "rc $? in $(($(date +%s) - t0)) s" >$L/build.done) >$L/build.log 2>&1 &
fi

if ! has test && [[ ! -x $P ]]; then  # parley alone, for synth and bench
  t0=$(date +%s)
  PARLEY_BUILD_ONLY=1 PARLEY_TARGETS=parley PARLEY_JOBS=${PARLEY_JOBS:-6} \
    tools/device/build_and_test.sh >"$OUT/build.log" 2>&1
  echo "parley build: rc $? in $(($(date +%s) - t0)) s"
fi
if has test; then
  t0=$(date +%s)
  [[ -n "${QUICK:-}" ]] && export PARLEY_BUILD_ONLY=1 PARLEY_TARGETS="parley test_llm"
  tools/device/build_and_test.sh -DPARLEY_TEST_DATA="$(realpath ../shared/data 2>/dev/null || echo /nonexistent)" \
    >"$OUT/build_test.log" 2>&1
  echo "build + test_ops/test_unit: rc $? in $(($(date +%s) - t0)) s"
  grep -E "^\[  FAILED|=== (PASSED|FAILED)|error:" "$OUT/build_test.log" | head -30
fi
export LD_LIBRARY_PATH="$arch_lib:/tmp/deps/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if has test; then
  "$BUILD_DIR/tests/test_llm" --gtest_filter='CudaLlm.*:*CudaForward*' 2>&1 | tee "$OUT/cuda_llm.log" |
    grep -E "^\[ +(OK|FAILED) |cuda forward|Failure|worst|PASSED|FAILED" | head -60
  # End to end: the trained model's tokenizer, template and engine on the GPU (CPU prints 579).
  for dt in bf16 f32; do
    echo "chat cuda $dt: $("$P" chat -m models/parley-chat-target -p "What is 123 + 456?" \
      --temperature 0 --no-think --device cuda --dtype $dt 2>&1 | tail -2 | tr '\n' ' ')"
  done
fi

synth() {  # synth SHAPE: the bf16 folder, once
  [[ -f /tmp/models/$1/model.safetensors ]] && return
  local t=$(date +%s)
  "$P" synth llm --shape "$1" --dtype bf16 -o "/tmp/models/$1" >/dev/null || echo "synth $1 failed"
  echo "synth $1: $(($(date +%s) - t)) s"
}

if has bench; then
  for s in $SHAPES; do
    in_time "bench $s" || continue
    synth "$s"
    "$P" bench llm -m "/tmp/models/$s" --device cuda --dtype bf16 --prompt-tokens $PROMPTS \
      --chunk 8192 --batch $BATCHES --decode-context "$CONTEXT" --decode-tokens "$STEPS" \
      --runs "$RUNS" 2>&1 | tee -a "$OUT/bench_llm.jsonl" | cut -c1-250
    [[ -n "${NO_TF:-}" ]] && continue
    in_time "transformers $s" || continue
    python3 tools/device/llm_transformers_bench.py --model "/tmp/models/$s" --prompt-tokens $PROMPTS \
      --batch $BATCHES --decode-context "$CONTEXT" --decode-tokens "$STEPS" --runs "$RUNS" 2>&1 |
      grep -v Warning | tee -a "$OUT/bench_llm.jsonl" | cut -c1-250
  done
fi

if has llamacpp; then
  while [[ ! -f $L/build.done ]] && in_time "llama.cpp build wait" >/dev/null; do sleep 5; done
  echo "llama.cpp build: $(cat $L/build.done)"; tail -3 $L/build.log
  for s in $SHAPES; do
    in_time "llama.cpp $s" || continue
    [[ -f $L/build.done ]] || { echo "llama.cpp build not done"; tail -5 $L/build.log; break; }
    synth "$s"
    g=/tmp/models/$s.bf16.gguf
    t=$(date +%s)
    [[ -f $g ]] || PYTHONPATH=$L/gguf-py python3 tools/device/llm_synth_gguf.py "/tmp/models/$s" "$g" \
      >"$OUT/convert_$s.log" 2>&1 || { echo "convert $s failed"; tail -5 "$OUT/convert_$s.log"; }
    echo "gguf $s: $(($(date +%s) - t)) s"
    # Prefill (-p, empty cache) and batch-1 decode (-n steps after a -d context); -ngl 99:
    # every layer on the GPU; flash attention on.
    $L/build/bin/llama-bench -m "$g" -ngl 99 -fa 1 -p $(echo $PROMPTS | tr ' ' ,) -n 0 -r "$RUNS" \
      -o jsonl 2>>"$OUT/llamacpp_bench.err" | tee -a "$OUT/llamacpp.jsonl" | cut -c1-300
    $L/build/bin/llama-bench -m "$g" -ngl 99 -fa 1 -p 0 -n "$STEPS" -d "$CONTEXT" -r "$RUNS" \
      -o jsonl 2>>"$OUT/llamacpp_bench.err" | tee -a "$OUT/llamacpp.jsonl" | cut -c1-300
    # Decode at each batch size: B sequences of a CONTEXT-token prompt, STEPS tokens each.
    $L/build/bin/llama-batched-bench -m "$g" -ngl 99 -fa on -npp "$CONTEXT" -ntg "$STEPS" \
      -npl $(echo $BATCHES | tr ' ' ,) -c $((64 * (CONTEXT + STEPS + 16))) 2>>"$OUT/llamacpp_bench.err" |
      tee -a "$OUT/llamacpp_batched.txt" | grep -E "^\|" | cut -c1-200
  done
fi
# Per-kernel device times (ncu, one kernel at a time) of two decode steps of PROFILE_SHAPE at
# each PROFILE_BATCHES size, as CSV: stage profile.
if has profile; then
  s=${PROFILE_SHAPE:-llama-3.1-8b}
  for b in ${PROFILE_BATCHES:-1 8}; do
    in_time "profile $s b$b" || continue
    synth "$s"
    ncu --metrics gpu__time_duration.sum --csv "$P" bench llm -m "/tmp/models/$s" --device cuda \
      --dtype bf16 --prompt-tokens 16 --batch "$b" --decode-context "$CONTEXT" --decode-tokens 2 \
      --runs 1 >"$OUT/ncu_${s}_b$b.csv" 2>"$OUT/ncu_${s}_b$b.err"
    echo "ncu $s b$b: rc $? $(wc -l <"$OUT/ncu_${s}_b$b.csv") lines"
  done
fi
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
