#!/usr/bin/env bash
# On the GPU machine: builds the parley CLI with CUDA (sm_90) and runs `parley bench ops`
# (every device unless --device is given), writing JSON lines to $OUT/bench_ops.jsonl (and a copy to stdout).
# Run from the repository root after (or without) tools/device/build_and_test.sh.
set -euo pipefail
BUILD_DIR=${BUILD_DIR:-build-gpu}
OUT=${OUT:-$BUILD_DIR}
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPARLEY_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DPARLEY_CLI=ON -DPARLEY_BENCH=OFF >/dev/null
ninja -C "$BUILD_DIR" -j16 parley
"$BUILD_DIR/parley" bench ops "$@" | tee "$OUT/bench_ops.jsonl"
