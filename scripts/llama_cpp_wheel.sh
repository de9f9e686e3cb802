#!/usr/bin/env bash
# Builds the pinned llama-cpp-python sdist into a wheel once and keeps it in a cache outside
# the repository, so that setup (and CI, a fresh clone on the same machine kind) installs it
# in seconds instead of compiling llama.cpp every run (7.5 min on 2 shared cores, 7.4
# CPU-minutes). Prints the wheel's path as its last line.
#   llama_cpp_wheel.sh VERSION SDIST_SHA256
#   PARLEY_CACHE=DIR   cache root (default ${XDG_CACHE_HOME:-~/.cache}/parley); wheels go to
#                      DIR/wheels/llama-cpp-python-VERSION-SHA256[:16]-FLAGS[:8]/
# The build is CPU only and portable to any x86-64 with AVX2, FMA, F16C and BMI2 (llama.cpp's
# "haswell" level, GGML_NATIVE off) so the cached wheel does not depend on the machine that
# built it; no GPU backend, no tools, no mtmd (llava), -j2. The sdist's sha256 is checked
# before anything is built; the cache key holds the version, the sha256 and a hash of the
# CMake flags, so changing any of them builds a new wheel.
set -euo pipefail
version=$1 sdist_sha256=$2

cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
cmake_args+=" -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_CUDA=OFF"
cmake_args+=" -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_BLAS=OFF -DGGML_BACKEND_DL=OFF"
cmake_args+=" -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
cmake_args+=" -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
# The build backend, pinned like everything else (--no-build-isolation below).
build_pins=(scikit-build-core==1.1.2 pathspec==1.1.1 packaging==26.4)

flags=$(echo "$cmake_args ${build_pins[*]}" | sha256sum | cut -c1-8)
cache="${PARLEY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/parley}/wheels"
dir="$cache/llama-cpp-python-$version-${sdist_sha256:0:16}-$flags"
wheel=$(ls "$dir"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -1 || true)
if [ -n "$wheel" ]; then
  echo "llama_cpp_wheel: cached $wheel" >&2
  echo "$wheel"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "llama_cpp_wheel: building llama-cpp-python $version for $dir (takes a while)" >&2
python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: -d "$tmp" \
  "llama-cpp-python==$version" >&2
sdist="$tmp/llama_cpp_python-$version.tar.gz"
echo "$sdist_sha256  $sdist" | sha256sum -c --quiet >&2
/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "${build_pins[@]}" >&2
start=$(date +%s)
CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL=2 \
  "$tmp/venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps \
  --no-build-isolation -w "$tmp/out" "$sdist" >&2
mkdir -p "$dir"
wheel=$(ls "$tmp"/out/llama_cpp_python-"$version"-*.whl)
# Copy under a temporary name then rename, so an interrupted copy is never taken for a wheel.
cp "$wheel" "$dir/.partial" && mv "$dir/.partial" "$dir/$(basename "$wheel")"
echo "$cmake_args" >"$dir/CMAKE_ARGS"
echo "llama_cpp_wheel: built in $(($(date +%s) - start)) s" >&2
echo "$dir/$(basename "$wheel")"
