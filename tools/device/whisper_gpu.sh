#!/usr/bin/env bash
# Whisper on the H200 in one device call (issue 7): build with CUDA, run the op tests and
# the CUDA Whisper tests, transcribe jfk.wav with the real tiny.en on every dtype, and
# bench a synthetic large-v3-turbo made on the spot. Run from the repository root with
# GPU_DATA naming a git-ignored folder (carried to the device) that holds data/ (audio/jfk.wav, whisper/
# multilingual.tiktoken), models/whisper-tiny.en and debs/ (the Debian packages the image
# lacks, see fetch_debs.sh; default: .deps/debs):
#   GPU_DATA=.gpuwt tools/device/whisper_gpu.sh [quick]     (quick: skip the test suites)
# Logs and JSON lines go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
GPU_DATA=${GPU_DATA:-.}
DEBS=${DEBS:-$GPU_DATA/debs}
[[ -d $DEBS ]] || DEBS=.deps/debs
# tiny.en (75 MB) is over the device tool's 64 MiB per call: it may travel as
# models/whisper-tiny.en/model.bin.partNN pieces over several calls to one warm machine;
# they are gathered in /tmp/tinyen, and model.bin appears there once all have come.
TINY=/tmp/tinyen
mkdir -p $TINY
cp $GPU_DATA/models/whisper-tiny.en/* $TINY/
if [[ ! -f $TINY/model.bin && -f $TINY/model.bin.part00 && -f $TINY/model.bin.part01 ]]; then
  cat $TINY/model.bin.part0? >$TINY/model.bin && rm $TINY/model.bin.part0?
fi
ls $TINY
mkdir -p "$OUT" /tmp/deps
for f in "$DEBS"/*.deb; do dpkg -x "$f" /tmp/deps; done
export PARLEY_DEPS_PREFIX=/tmp/deps BUILD_DIR=${BUILD_DIR:-/tmp/build-gpu}
export PARLEY_CLI=ON PARLEY_TARGETS="parley test_whisper test_audio"
t0=$(date +%s)
tools/device/build_and_test.sh -DPARLEY_TEST_DATA="$(realpath $GPU_DATA/data)" \
  -DPARLEY_TEST_MODEL_DIR=$TINY >"$OUT/build_test.log" 2>&1
echo "build + test_ops/test_unit: rc $? in $(($(date +%s) - t0)) s"
grep -E "FAILED|PASSED|error" "$OUT/build_test.log" | head -20
# build_and_test's LD_LIBRARY_PATH for the unpacked .debs
arch_lib="/tmp/deps/usr/lib/$(gcc -print-multiarch)"
export LD_LIBRARY_PATH="$arch_lib:/tmp/deps/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
P=$BUILD_DIR/parley
if [[ "${1:-}" != quick ]]; then
  "$BUILD_DIR/tests/test_whisper" --gtest_filter='WhisperCuda*:*OnCuda*' 2>&1 | tail -25 | tee "$OUT/cuda_test.log"
  "$BUILD_DIR/tests/test_audio" --gtest_filter='*Cuda*' 2>&1 | tail -12 | tee -a "$OUT/cuda_test.log"
fi
for dt in f32 f16 bf16; do
  echo "== transcribe tiny.en cuda $dt"
  "$P" transcribe -m $TINY --device cuda --dtype $dt $GPU_DATA/data/audio/jfk.wav 2>&1 | tail -3
done
"$P" bench whisper -m $TINY --audio $GPU_DATA/data/audio/jfk.wav --device cuda --dtype f16 \
  --runs 5 2>&1 | tee "$OUT/bench_tiny.jsonl" | cut -c1-220
t1=$(date +%s)
"$P" synth whisper --shape large-v3-turbo --vocab $GPU_DATA/data/whisper/multilingual.tiktoken --dtype f16 \
  -o /tmp/turbo >/dev/null 2>&1 || echo "synth failed"
echo "synth turbo: $(($(date +%s) - t1)) s"
for dt in ${DTYPES:-f16 bf16}; do
  "$P" bench whisper -m /tmp/turbo --audio $GPU_DATA/data/audio/jfk.wav --device cuda --dtype $dt \
    --runs ${RUNS:-10} 2>&1 | tee "$OUT/bench_turbo_$dt.jsonl" | cut -c1-220
done
# The decoder without CUDA graphs (every kernel launched from the host), for comparison.
if [[ -n "${NOGRAPH:-}" ]]; then
  PARLEY_CUDA_GRAPHS=0 "$P" bench whisper -m /tmp/turbo --audio $GPU_DATA/data/audio/jfk.wav --device cuda \
    --dtype f16 --runs ${RUNS:-10} 2>&1 | tee "$OUT/bench_turbo_f16_nographs.jsonl" |
    grep -v '"bench":"whisper_\(load\|audio\|mel\)' | cut -c1-220
fi
# Per-kernel device times of one turbo encoder window and a few decoder steps (in launch
# order; split into phases by hand): PROFILE=1.
if [[ -n "${PROFILE:-}" ]]; then
  which nsys ncu
  ncu --metrics gpu__time_duration.sum --csv --launch-count ${PROFILE_LAUNCHES:-1400} ${PROFILE_ARGS:-} \
    "$P" bench whisper -m /tmp/turbo --audio $GPU_DATA/data/audio/jfk.wav --device cuda --dtype f16 \
    --runs 1 --warmup 0 --decode-tokens 8 >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
  echo "ncu rc $?: $(wc -l <"$OUT/ncu.csv") lines"; tail -3 "$OUT/ncu.err"
fi
