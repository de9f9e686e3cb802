#!/usr/bin/env bash
# Builds parley with CUDA (sm_90) on the GPU machine and runs test_ops and test_unit.
# Run from the repository root:  tools/device/build_and_test.sh [extra cmake args...]
#   PARLEY_DEPS_PREFIX  optional: a folder holding Debian .debs unpacked with `dpkg -x`
#                       (the H200 image lacks kissfft and PCRE2's headers: unpack
#                       libkissfft-dev, libkissfft-float131 and libpcre2-dev there)
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
  export PKG_CONFIG_PATH="$arch_lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  # Debian's .pc files say prefix=/usr; point them at the unpacked tree.
  sed -i "s|^prefix=/usr\$|prefix=$deps/usr|" "$arch_lib"/pkgconfig/*.pc 2>/dev/null || true
  # -dev packages link lib.so to a versioned file that lives in the runtime package:
  # where the unpacked link dangles, point it at the machine's own soname.
  for link in "$arch_lib"/*.so; do
    [ -e "$link" ] && continue
    so=$(basename "$link")
    target=$(ls /usr/lib/"$(gcc -print-multiarch)"/"$so".* 2>/dev/null | head -n 1 || true)
    [ -n "$target" ] && ln -sf "$target" "$link"
  done
fi

# CMAKE_CUDA20_*: CMake < 3.26 has no C++20 flag for nvcc; harmless on newer CMake.
cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPARLEY_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
  -DPARLEY_TESTS=ON -DPARLEY_CLI="${PARLEY_CLI:-OFF}" -DPARLEY_BENCH=OFF \
  -DCMAKE_PREFIX_PATH="$prefix_path" "$@"
# PARLEY_TARGETS: more to build (e.g. "parley test_whisper"); only test_ops/test_unit run.
# PARLEY_BUILD_ONLY=1: build PARLEY_TARGETS alone (PARLEY_JOBS jobs, default 16), run nothing.
if [[ -n "${PARLEY_BUILD_ONLY:-}" ]]; then
  exec ninja -C "$BUILD_DIR" -j"${PARLEY_JOBS:-16}" ${PARLEY_TARGETS:-parley}
fi
ninja -C "$BUILD_DIR" -j16 test_ops test_unit ${PARLEY_TARGETS:-}

nvidia-smi

status=0
for t in test_ops test_unit; do
  echo "=== $t"
  "$BUILD_DIR/tests/$t" --gtest_output="json:$OUT/$t.json" || status=1
done
echo "=== $([[ $status == 0 ]] && echo PASSED || echo FAILED)"
exit $status
