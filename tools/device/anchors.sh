#!/usr/bin/env bash
# Side-by-side anchors on the H200 (issue 7, item 6): parley, whisper.cpp built here from
# source with CUDA, and Hugging Face transformers (fp16, sdpa), on the same weights (a
# synthetic large-v3-turbo in f16, converted to ggml for whisper.cpp) and the same jfk.wav,
# in one run. Optionally the real tiny.en (CTranslate2 layout) for a check that the text
# is right in parley and whisper.cpp. Run from the repository root once parley is built:
#
#   tools/device/anchors.sh build    # whisper.cpp only: start it early, in the background
#   tools/device/anchors.sh prepare PARLEY_BIN TURBO_DIR JFK_WAV [TINY_EN_DIR]
#   tools/device/anchors.sh bench   PARLEY_BIN TURBO_DIR JFK_WAV [TINY_EN_DIR]
#   tools/device/anchors.sh all     PARLEY_BIN TURBO_DIR JFK_WAV [TINY_EN_DIR]
#
# prepare: the whisper.cpp build (in the background unless one was started) beside the
# synthetic turbo (when missing) and the ggml conversions, then waits for the build.
# bench: prepare (what is already in $WORK is kept), then every timing, one system after
# the other on a quiet machine. all: bench with a fresh build. TURBO_DIR is what
#   parley synth whisper --shape large-v3-turbo --vocab multilingual.tiktoken --dtype f16 -o DIR
# writes (`all` and `bench` make it with PARLEY_BIN when DIR has no model.safetensors).
#
# Environment (defaults):
#   OUT=/tmp/out          anchors.jsonl (every figure, one schema: {"system", "bench", "ms",
#                         "unit", "model", ...}), anchors.md (summarize.py's tables),
#                         anchors.log (everything else: build, conversions, raw outputs)
#   RUNS=10 WARMUP=2 TOKENS=30   medians of RUNS timed calls; forced decoder steps
#   GPU_DATA=.            whisper_gpu.sh's carried folder (data/, models/, debs/)
#   VOCAB_DIR             holds multilingual.tiktoken (and gpt2.tiktoken for tiny.en);
#                         default: the first of $GPU_DATA/data/whisper, $GPU_DATA/data,
#                         data/whisper, data that has multilingual.tiktoken
#   WCPP_TAR=.deps/whispercpp/whisper.cpp-$WCPP_COMMIT_SHORT.tar.gz   the trimmed source
#                         (3.6 MB; .deps is git-ignored and travels as a carried path), made
#                         from a clone of whisper.cpp by tools/cpu/whispercpp.sh (WCPP_GIT=CLONE;
#                         its WCPP_PATHS: the library, examples/bench, and examples/cli and
#                         examples/quantize for the CPU benchmark's whisper-cli); an older
#                         tarball of only CMakeLists.txt cmake include src ggml examples/bench
#                         LICENSE still builds everything here
#   WORK=/tmp/anchors     build tree, ggml files, vocabulary folder
#   JOBS=16 THREADS=16    build jobs; CPU threads of every system's CPU side
#   PARLEY_DEPS_PREFIX=/tmp/deps   unpacked .debs parley links (added to LD_LIBRARY_PATH)
#   DEVICE=cuda           cpu: a smoke test without a GPU (whisper.cpp without CUDA, parley
#                         --device cpu, transformers on the CPU; then set PARLEY_DTYPE=f32
#                         TF_DTYPE=float32 and, for torch 1.x, TF_ATTN=eager)
#   PARLEY_DTYPE=f16 TF_DTYPE=float16 TF_ATTN=sdpa PYTHON=python3
#   LABEL=turbo-f16       the "model" field of TURBO_DIR's rows (tiny.en's are "tiny.en")
#   WCPP_BENCH=1          0: skip whisper-bench (slow on a CPU)
#
# whisper.cpp: ggml-org/whisper.cpp master at the commit below (v1.9.3-50), the library,
# examples/bench (whisper-bench) and tools/device/anchors/whispercpp_forced.cpp, Release,
# -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90, flash attention on at run time.
set -uo pipefail
WCPP_COMMIT=233fe1fc9b48a09e361d3594520838ca266537fe
WCPP_COMMIT_SHORT=${WCPP_COMMIT:0:9}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/out}
RUNS=${RUNS:-10}
WARMUP=${WARMUP:-2}
TOKENS=${TOKENS:-30}
GPU_DATA=${GPU_DATA:-.}
if [[ -z ${VOCAB_DIR:-} ]]; then  # whisper_gpu.sh's layouts, newest first
  for d in "$GPU_DATA/data/whisper" "$GPU_DATA/data" data/whisper data; do
    [[ -f $d/multilingual.tiktoken ]] && VOCAB_DIR=$d && break
  done
fi
VOCAB_DIR=${VOCAB_DIR:-data}
WCPP_TAR=${WCPP_TAR:-$ROOT/.deps/whispercpp/whisper.cpp-$WCPP_COMMIT_SHORT.tar.gz}
WORK=${WORK:-/tmp/anchors}
JOBS=${JOBS:-16}
THREADS=${THREADS:-16}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
PARLEY_DTYPE=${PARLEY_DTYPE:-f16}
TF_DTYPE=${TF_DTYPE:-float16}
TF_ATTN=${TF_ATTN:-sdpa}
LABEL=${LABEL:-turbo-f16}  # the "model" field of the synthetic turbo's rows
if [[ $DEVICE == cuda ]]; then
  WCPP_CMAKE=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90)
  WCPP_RUN=()
else
  WCPP_CMAKE=(-DGGML_CUDA=OFF)
  WCPP_RUN=(--no-gpu)
fi
export PATH="/usr/local/cuda/bin:$PATH"
# The Debian libraries parley was built against, unpacked by whisper_gpu.sh / build_and_test.sh.
DEPS=${PARLEY_DEPS_PREFIX:-/tmp/deps}
if [[ -d $DEPS/usr/lib ]]; then
  arch_lib="$DEPS/usr/lib/$(gcc -print-multiarch)"
  export LD_LIBRARY_PATH="$arch_lib:$DEPS/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
mkdir -p "$OUT" "$WORK"
LOG="$OUT/anchors.log"
JSONL="$OUT/anchors.jsonl"
WCPP_BIN="$WORK/build"

log() { echo "[anchors $(date +%T)] $*" | tee -a "$LOG" >&2; }

# whisper.cpp from the trimmed tarball; writes $WORK/build.rc when done. Its caller writes
# the building process's id to $WORK/build.started first.
build_wcpp() {
  rm -f "$WORK/build.rc"
  local t0=$SECONDS src="$WORK/whisper.cpp"
  # Extracted once: a build cut short by a call's time limit resumes where it stopped.
  if [[ ! -f $src/include/whisper.h ]]; then
    if ! (mkdir -p "$src" && tar -xzf "$WCPP_TAR" -C "$src"); then
      rm -rf "$src"
      echo 1 >"$WORK/build.rc"
      return 1
    fi
  fi
  {
    cmake -S "$ROOT/tools/device/anchors" -B "$WCPP_BIN" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DWHISPER_CPP_SRC="$src" "${WCPP_CMAKE[@]}" ${WCPP_CMAKE_EXTRA:-} &&
      ninja -C "$WCPP_BIN" -j"$JOBS" whisper-bench whispercpp_forced
  } >"$WORK/build.log" 2>&1
  local rc=$?
  echo $rc >"$WORK/build.rc"
  echo "whisper.cpp build: rc $rc in $((SECONDS - t0)) s" >>"$WORK/build.log"
  return $rc
}

wait_build() {
  while [[ ! -f "$WORK/build.rc" ]]; do
    if ! kill -0 "$(cat "$WORK/build.started" 2>/dev/null)" 2>/dev/null; then
      log "no whisper.cpp build running and none finished: building"
      echo $$ >"$WORK/build.started"
      build_wcpp
    fi
    sleep 2
  done
  tail -n 3 "$WORK/build.log" >>"$LOG"
  if [[ $(cat "$WORK/build.rc") != 0 ]]; then
    log "whisper.cpp build failed; its log's tail:"
    tail -n 40 "$WORK/build.log" | tee -a "$LOG" >&2
    return 1
  fi
}

# mel_filters.npz for to_layouts.py (openai's librosa filters; transformers' mel_filter_bank
# gives the same numbers, within 4e-9) and the tiktoken ranks.
make_vocab() {
  mkdir -p "$WORK/vocab"
  for f in multilingual.tiktoken gpt2.tiktoken mel_filters.npz; do
    [[ -f "$VOCAB_DIR/$f" ]] && ln -sf "$(realpath "$VOCAB_DIR/$f")" "$WORK/vocab/$f"
  done
  [[ -f "$WORK/vocab/mel_filters.npz" ]] || $PY - "$WORK/vocab/mel_filters.npz" <<'EOF'
import sys
import numpy as np
from transformers import WhisperFeatureExtractor
np.savez(sys.argv[1], **{f"mel_{n}": WhisperFeatureExtractor(feature_size=n).mel_filters.T
                         .astype(np.float32) for n in (80, 128)})
EOF
}

convert() {  # SRC_DIR OUT.bin
  local t0=$SECONDS
  $PY "$ROOT/tools/reference/to_layouts.py" ggml "$1" "$2" --vocab-dir "$WORK/vocab" >>"$LOG" 2>&1 &&
    log "converted $1 -> $2 ($(du -h "$2" | cut -f1)) in $((SECONDS - t0)) s"
}

# Rows of whisper-bench's timings (whisper_print_timings) in the anchors' schema; ms is the
# total over the count (its own per-run column has two decimals).
whisper_bench_rows() {  # LABEL < whisper-bench output
  $PY -c '
import json, re, sys
label = sys.argv[1]
for line in sys.stdin:
    m = re.search(r"(encode|decode|batchd|prompt) time =\s*([\d.]+) ms /\s*(\d+) runs \(\s*([\d.]+) ms per run", line)
    if m and int(m.group(3)) > 0:
        unit = "window" if m.group(1) == "encode" else "token"
        print(json.dumps({"system": "whisper.cpp", "bench": "wcpp_bench_" + m.group(1),
                          "ms": float(m.group(2)) / int(m.group(3)), "unit": unit, "calls": int(m.group(3)),
                          "model": label, "source": "whisper-bench", "device": sys.argv[2],
                          "flash_attn": True}))
' "$1" "$DEVICE"
}

bench_all() {  # PARLEY TURBO JFK [TINY]
  local parley=$1 turbo=$2 jfk=$3 tiny=${4:-}
  : >"$JSONL"
  local norm="$ROOT/tools/device/anchors/summarize.py"
  log "parley bench whisper: turbo f16"
  "$parley" bench whisper -m "$turbo" --audio "$jfk" --device "$DEVICE" --dtype "$PARLEY_DTYPE" --runs "$RUNS" \
    --warmup "$WARMUP" --decode-tokens "$TOKENS" --threads "$THREADS" 2>>"$LOG" |
    tee -a "$LOG" | $PY "$norm" --from-parley "$LABEL" >>"$JSONL"
  if [[ -n "$tiny" ]]; then
    log "parley bench whisper: tiny.en f16"
    "$parley" bench whisper -m "$tiny" --audio "$jfk" --device "$DEVICE" --dtype "$PARLEY_DTYPE" --runs "$RUNS" \
      --warmup "$WARMUP" --decode-tokens "$TOKENS" --threads "$THREADS" 2>>"$LOG" |
      tee -a "$LOG" | $PY "$norm" --from-parley tiny.en >>"$JSONL"
  fi
  if wait_build; then
    if [[ ${WCPP_BENCH:-1} != 0 ]]; then
      log "whisper.cpp: whisper-bench on turbo"
      "$WCPP_BIN/whisper-bench" -m "$WORK/turbo-f16.bin" -t "$THREADS" -fa "${WCPP_RUN[@]/--no-gpu/-ng}" 2>&1 |
        tee -a "$LOG" | whisper_bench_rows "$LABEL" >>"$JSONL"
    fi
    log "whisper.cpp: whispercpp_forced on turbo"
    "$WCPP_BIN/whispercpp_forced" -m "$WORK/turbo-f16.bin" --audio "$jfk" --runs "$RUNS" \
      --warmup "$WARMUP" --tokens "$TOKENS" --threads "$THREADS" --label "$LABEL" "${WCPP_RUN[@]}" \
      2>>"$LOG" >>"$JSONL" || log "whispercpp_forced failed on turbo"
    if [[ -n "$tiny" && -f "$WORK/tinyen-f16.bin" ]]; then
      log "whisper.cpp: whispercpp_forced on tiny.en"
      "$WCPP_BIN/whispercpp_forced" -m "$WORK/tinyen-f16.bin" --audio "$jfk" --runs "$RUNS" \
        --warmup "$WARMUP" --tokens "$TOKENS" --threads "$THREADS" --label tiny.en --transcribe "${WCPP_RUN[@]}" \
        2>>"$LOG" >>"$JSONL" || log "whispercpp_forced failed on tiny.en"
    fi
  fi
  log "transformers on turbo ($TF_DTYPE, $TF_ATTN)"
  PYTHONUNBUFFERED=1 OMP_NUM_THREADS=$THREADS $PY "$ROOT/tools/device/anchors/transformers_bench.py" \
    "$turbo" "$jfk" --device "$DEVICE" --dtype "$TF_DTYPE" --attn "$TF_ATTN" --runs "$RUNS" --warmup "$WARMUP" \
    --tokens "$TOKENS" --label "$LABEL" 2>>"$LOG" >>"$JSONL" || log "transformers_bench failed"
  $PY "$norm" "$JSONL" >"$OUT/anchors.md"
  cat "$OUT/anchors.md"
}

prepare() {  # PARLEY TURBO [TINY]: the synthetic turbo if missing, then the ggml files
  local parley=$1 turbo=$2 tiny=${3:-}
  if [[ ! -f "$turbo/model.safetensors" ]]; then
    log "parley synth whisper large-v3-turbo f16 -> $turbo"
    "$parley" synth whisper --shape large-v3-turbo --vocab "$VOCAB_DIR/multilingual.tiktoken" \
      --dtype f16 -o "$turbo" >>"$LOG" 2>&1 || log "synth failed"
  fi
  make_vocab >>"$LOG" 2>&1 || log "mel_filters.npz failed"
  [[ -f "$WORK/turbo-f16.bin" ]] || convert "$turbo" "$WORK/turbo-f16.bin"
  if [[ -n "$tiny" && ! -f "$WORK/tinyen-f16.bin" ]]; then
    convert "$tiny" "$WORK/tinyen-f16.bin"
  fi
}

cmd=${1:-}
shift || true
case "$cmd" in
  build)
    echo $$ >"$WORK/build.started"
    build_wcpp
    tail -n 1 "$WORK/build.log"
    ;;
  prepare | bench | all)
    [[ $# -ge 3 ]] || {
      echo "usage: $0 $cmd PARLEY_BIN TURBO_DIR JFK_WAV [TINY_EN_DIR]" >&2
      exit 2
    }
    t0=$SECONDS
    if [[ $cmd == all || ! -f $WORK/build.started ]]; then
      build_wcpp &
      build_pid=$!
      echo $build_pid >"$WORK/build.started"
    fi
    prepare "$1" "$2" "${4:-}"
    log "prepared in $((SECONDS - t0)) s; waiting for the whisper.cpp build"
    wait_build
    log "whisper.cpp ready at $((SECONDS - t0)) s"
    [[ $cmd == prepare ]] || bench_all "$@"
    [[ -n "${build_pid:-}" ]] && wait "$build_pid"
    log "done in $((SECONDS - t0)) s"
    ;;
  *)
    sed -n 2,30p "$0"
    exit 2
    ;;
esac
