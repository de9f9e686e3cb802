#!/usr/bin/env bash
# whisper.cpp as an engine of the CPU benchmark (bench/whisper_cpu.py, issue 28): builds
# whisper.cpp's own whisper-cli and whisper-quantize for this machine's CPU from the pinned
# source (the commit and trimmed tarball of tools/device/anchors.sh, built through
# tools/device/anchors/CMakeLists.txt), and writes the real tiny.en as whisper.cpp ggml files.
# Run from anywhere; outputs already there are kept (delete $WORK to start over):
#
#   tools/cpu/whispercpp.sh          # WCPP_GIT=CLONE the first time, to make the tarball
#   .venv-ref/bin/python bench/whisper_cpu.py    # whisper.cpp rows: build/whisper-cli on
#       ggml-tiny.en-q8_0.bin below by default (--whispercpp, --whispercpp-model)
#
# Produces, under WORK (git-ignored):
#   build/whisper-cli, build/whisper-quantize   whisper.cpp at WCPP_COMMIT, Release, for the
#       instruction set parley's CPU kernels use: AVX2, FMA, F16C (and BMI2, ggml's x86-64
#       "haswell" level, as scripts/llama_cpp_wheel.sh), no AVX-512 even where the machine has
#       it; otherwise whisper.cpp's default CPU build: OpenMP, no BLAS, no CUDA, static libraries
#   build-native/...        the same with WCPP_ISA=native: GGML_NATIVE=ON (-march=native),
#       whisper.cpp's own default, which on an AVX-512 machine also takes AVX-512 (VNNI, BF16)
#   ggml-tiny.en-f16.bin    tools/reference/to_layouts.py ggml of MODEL (f16 matrices, the rest f32)
#   ggml-tiny.en-q8_0.bin   whisper-quantize ... q8_0 of it (every 2-D matrix, encoder included)
#
# Environment (defaults):
#   WORK=.deps/whispercpp-cpu   source tree (src/), build tree (build/), ggml files
#   WCPP_TAR=.deps/whispercpp/whisper.cpp-233fe1fc9.tar.gz   the trimmed source, anchors.sh's
#                               recipe (it must hold examples/cli and examples/quantize)
#   WCPP_GIT                    a clone of whisper.cpp holding WCPP_COMMIT: makes WCPP_TAR by
#                               that recipe when it is missing
#   MODEL=~/.local/share/parley/models/whisper-tiny.en   CTranslate2 tiny.en (scripts/setup.sh)
#   VOCAB_DIR=../shared/data/whisper   gpt2.tiktoken and mel_filters.npz for to_layouts.py
#   WCPP_ISA=avx2               or native (above)
#   JOBS=2  PYTHON=.venv-ref/bin/python (NumPy)
set -euo pipefail
WCPP_COMMIT=233fe1fc9b48a09e361d3594520838ca266537fe  # as tools/device/anchors.sh
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-$ROOT/.deps/whispercpp-cpu}
WCPP_TAR=${WCPP_TAR:-$ROOT/.deps/whispercpp/whisper.cpp-${WCPP_COMMIT:0:9}.tar.gz}
MODEL=${MODEL:-$HOME/.local/share/parley/models/whisper-tiny.en}
VOCAB_DIR=${VOCAB_DIR:-$ROOT/../shared/data/whisper}
JOBS=${JOBS:-2}
PY=${PYTHON:-$ROOT/.venv-ref/bin/python}
if [[ ${WCPP_ISA:-avx2} == native ]]; then
  build="$WORK/build-native"
  isa=(-DGGML_NATIVE=ON)
else
  build="$WORK/build"
  isa=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON
    -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF
    -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF)
fi
# The paths of the trimmed tarball: the library, whisper-bench (the GPU anchors), whisper-cli
# and whisper-quantize with the examples' common sources.
WCPP_PATHS=(CMakeLists.txt cmake include src ggml LICENSE examples/bench examples/cli
  examples/quantize examples/common.h examples/common.cpp examples/common-ggml.h
  examples/common-ggml.cpp examples/common-whisper.h examples/common-whisper.cpp
  examples/grammar-parser.h examples/grammar-parser.cpp examples/stb_vorbis.c examples/miniaudio.h)

log() { echo "[whispercpp $(date +%T)] $*" >&2; }

if [[ ! -f $WCPP_TAR ]]; then
  [[ -n ${WCPP_GIT:-} ]] || {
    log "no $WCPP_TAR: set WCPP_GIT to a whisper.cpp clone that has $WCPP_COMMIT"
    exit 1
  }
  mkdir -p "$(dirname "$WCPP_TAR")"
  git -C "$WCPP_GIT" archive --format=tar "$WCPP_COMMIT" "${WCPP_PATHS[@]}" |
    gzip -9 >"$WCPP_TAR.tmp"
  mv "$WCPP_TAR.tmp" "$WCPP_TAR"
  log "made $WCPP_TAR ($(du -h "$WCPP_TAR" | cut -f1))"
fi

src="$WORK/src"
if [[ ! -f $src/examples/cli/cli.cpp ]]; then
  rm -rf "$src"
  mkdir -p "$src"
  tar -xzf "$WCPP_TAR" -C "$src"
  [[ -f $src/examples/cli/cli.cpp ]] || {
    log "$WCPP_TAR has no examples/cli: remake it with WCPP_GIT (the recipe above)"
    exit 1
  }
fi

t0=$SECONDS
cmake -S "$ROOT/tools/device/anchors" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DWHISPER_CPP_SRC="$src" "${isa[@]}" -DGGML_OPENMP=ON -DGGML_BLAS=OFF -DGGML_CUDA=OFF \
  >"$build.log" 2>&1
ninja -C "$build" -j"$JOBS" whisper-cli whisper-quantize >>"$build.log" 2>&1 || {
  tail -n 30 "$build.log" >&2
  exit 1
}
log "built $build/whisper-cli and whisper-quantize in $((SECONDS - t0)) s (log: $build.log)"

f16="$WORK/ggml-tiny.en-f16.bin"
q8="$WORK/ggml-tiny.en-q8_0.bin"
if [[ ! -f $f16 ]]; then
  "$PY" "$ROOT/tools/reference/to_layouts.py" ggml "$MODEL" "$f16.tmp" --vocab-dir "$VOCAB_DIR" >&2
  mv "$f16.tmp" "$f16"
fi
if [[ ! -f $q8 ]]; then
  "$build/whisper-quantize" "$f16" "$q8.tmp" q8_0 >"$WORK/quantize.log" 2>&1 || {
    tail -n 20 "$WORK/quantize.log" >&2
    exit 1
  }
  mv "$q8.tmp" "$q8"
fi
log "models: $f16, $q8"
