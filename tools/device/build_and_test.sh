#!/usr/bin/env bash
# Builds parley with CUDA (sm_90) on the GPU machine and runs test_ops and test_unit.
# Run from the repository root:  tools/device/build_and_test.sh [extra cmake args...]
#   PARLEY_DEPS_PREFIX  optional: a folder holding Debian .debs unpacked with `dpkg -x`
#                       (gtest, oneDNN, CLI11, nlohmann-json, zlib headers, ...)
#   OUT                 where the gtest JSON reports go (default: the build folder)
#   BUILD_DIR           default build-gpu (kept between runs for incremental builds)
# Exits non-zero when the build or any test fails.
set -euo pipefail

BUILD_DIR=${BUILD_DIR:-build-gpu}
OUT=${OUT:-$BUILD_DIR}
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH"

prefix_path=""
if [[ -n "${PARLEY_DEPS_PREFIX:-}" ]]; then
  deps=$(realpath "$PARLEY_DEPS_PREFIX")
  arch_lib="$deps/usr/lib/$(gcc -print-multiarch)"
  prefix_path="$deps/usr;$deps"
  export CPATH="$deps/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$arch_lib:$deps/usr/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$arch_lib:$deps/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# CMAKE_CUDA20_*: CMake < 3.26 has no C++20 flag for nvcc; harmless on newer CMake.
cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPARLEY_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 \
  -DPARLEY_TESTS=ON -DPARLEY_CLI="${PARLEY_CLI:-OFF}" -DPARLEY_BENCH=OFF \
  -DCMAKE_PREFIX_PATH="$prefix_path" "$@"
ninja -C "$BUILD_DIR" -j16 test_ops test_unit

nvidia-smi

status=0
for t in test_ops test_unit; do
  echo "=== $t"
  "$BUILD_DIR/tests/$t" --gtest_output="json:$OUT/$t.json" || status=1
done
echo "=== $([[ $status == 0 ]] && echo PASSED || echo FAILED)"
exit $status
