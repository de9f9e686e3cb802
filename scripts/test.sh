#!/usr/bin/env bash
# Runs every test: the format check, the CTest suites (unit, ops, io, cli) of build/, and
# a short run of every libFuzzer target under AddressSanitizer (build-fuzz/, clang).
#   PARLEY_BUILD=DIR        the build folder scripts/setup.sh made (default build)
#   PARLEY_FUZZ_SECONDS=N   seconds per fuzz target (default 10; 0 skips fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${PARLEY_BUILD:-build}"
fuzz_seconds="${PARLEY_FUZZ_SECONDS:-10}"

scripts/format.sh --check
cmake --build "$build"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"

if [ "$fuzz_seconds" -gt 0 ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DPARLEY_FUZZ=ON -DPARLEY_CUDA=OFF \
    -DPARLEY_CLI=OFF -DPARLEY_TESTS=ON >/dev/null
  mapfile -t targets < <(ls tests/fuzz/fuzz_*.cpp | xargs -n1 basename | sed 's/\.cpp$//')
  cmake --build build-fuzz --target "${targets[@]}"
  for t in "${targets[@]}"; do
    name=${t#fuzz_}
    corpus=$(mktemp -d)
    [ -d "tests/fuzz/corpus/$name" ] && cp -r "tests/fuzz/corpus/$name/." "$corpus/"
    echo "fuzz: $t for ${fuzz_seconds}s"
    ASAN_OPTIONS=detect_leaks=1 "build-fuzz/tests/$t" -max_total_time="$fuzz_seconds" -rss_limit_mb=4096 \
      -print_final_stats=0 "$corpus" 2>&1 | tail -n 3
    rm -rf "$corpus"
  done
fi
echo "tests: all passed"
