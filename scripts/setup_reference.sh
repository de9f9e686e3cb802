#!/usr/bin/env bash
# Sets up the openai-whisper reference that tests/parity compares parley against:
# Debian 12's CPU PyTorch and numba (PyPI's default torch pulls gigabytes of CUDA
# libraries), and a virtual environment .venv-ref on the system python that sees them,
# with openai-whisper and its remaining pure-python/small deps pinned from PyPI
# (--no-deps each, so pip never replaces Debian's torch/numba/numpy). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib/apt.sh

# Debian's torch multiplies through libblas.so.3, which without another provider is the
# netlib reference BLAS: tiny's encoder took 15 s a window on one core. OpenBLAS (serial:
# no threads of its own, so the result does not depend on the machine's cores) takes the
# alternative over and the same window takes 0.3 s.
packages=(python3 python3-venv python3-numpy python3-torch python3-numba ffmpeg libopenblas0-serial)
install_missing "${packages[@]}"

# The system python explicitly: a pyenv python first on PATH cannot see Debian's torch.
venv=.venv-ref
if [ ! -x "$venv/bin/python" ]; then
  echo "setup_reference: creating $venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi

# openai-whisper's install_requires are numba, numpy, torch, tqdm, more-itertools,
# tiktoken (and triton on Linux x86_64, only for its GPU timing kernels: not needed).
# tiktoken needs regex at import (requests only to download encodings, which whisper
# does not: it ships its vocabularies).
#
# faster-whisper 1.2.1 requires ctranslate2, tokenizers, huggingface-hub, av, tqdm and
# onnxruntime; it imports onnxruntime only inside its VAD functions (not used by the parity
# test: vad_filter=False), so onnxruntime is not pinned here for it. av is imported at
# start-up (15.1.0: the newest with a cp311 wheel before 16). huggingface-hub 0.30.2 needs
# filelock, fsspec, packaging (pyyaml, requests, typing-extensions: Debian's).
# transformers 4.48.3 is the newest whose torch extra accepts Debian's torch 1.13
# (4.49.0 requires torch>=2.0); it needs tokenizers <0.22,>=0.21, safetensors,
# huggingface-hub, regex.
pins=(
  openai-whisper==20250625
  tiktoken==0.9.0
  regex==2024.11.6
  tqdm==4.67.1
  more-itertools==10.7.0
  # Silero VAD parity (tests/parity/vad_parity_test.py): onnxruntime runs the ONNX file;
  # its Requires-Dist coloredlogs, flatbuffers, protobuf, sympy serve its tools, not
  # InferenceSession, so they are left out. silero-vad needs packaging at import (and
  # torchaudio, only for audio files: tools/reference/vad_reference.py stubs it).
  onnxruntime==1.20.1
  silero-vad==6.2.1
  packaging==24.2
  faster-whisper==1.2.1
  ctranslate2==4.6.0
  av==15.1.0
  tokenizers==0.21.1
  huggingface-hub==0.30.2
  filelock==3.18.0
  fsspec==2025.3.2
  transformers==4.48.3
  safetensors==0.5.3
  # The server's API tests (tests/server): the official openai SDK and pytest, with
  # every dependency they import that Debian 12 lacks or ships too old (typing-extensions
  # 4.4, idna 3.3, pygments 2.14). openai 3.x talks HTTP through httpx2/httpcore2.
  openai==3.57.0
  # openai[realtime]: client.realtime.connect (tests/server/test_realtime.py)
  websockets==15.0.1
  httpx2==2.16.2
  httpcore2==2.16.2
  h11==0.16.0
  anyio==4.16.0
  sniffio==1.3.1
  idna==3.20
  truststore==0.10.5
  jiter==0.19.0
  pydantic==2.14.4
  pydantic-core==2.50.5
  annotated-types==0.8.0
  typing-extensions==4.16.0
  typing-inspection==0.4.5
  # The web page's test (tests/server/test_web.py): playwright drives Debian's chromium
  # (setup.sh) through executable_path; `playwright install` (a browser download) is never run.
  playwright==1.65.2
  greenlet==3.2.4
  pytest==9.2.0
  pluggy==1.7.0
  iniconfig==2.3.1
  pygments==2.21.0
)
need=()
for pin in "${pins[@]}"; do
  name=${pin%%==*}
  want=${pin##*==}
  have=$("$venv/bin/python" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p' || true)
  [ "$have" = "$want" ] || need+=("$pin")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup_reference: pip installing ${need[*]}"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "${need[@]}"
fi

"$venv/bin/python" -c 'import torch, numba, whisper; print("setup_reference: openai-whisper", whisper.__version__, "torch", torch.__version__, "numba", numba.__version__)'
"$venv/bin/python" -c 'import onnxruntime; print("setup_reference: onnxruntime", onnxruntime.__version__)'
"$venv/bin/python" -c 'import faster_whisper, ctranslate2, transformers; print("setup_reference: faster-whisper", faster_whisper.__version__, "ctranslate2", ctranslate2.__version__, "transformers", transformers.__version__)'
"$venv/bin/python" -c 'import openai, pytest; print("setup_reference: openai", openai.__version__, "pytest", pytest.__version__)'
"$venv/bin/python" -c 'import playwright.sync_api, importlib.metadata as m; print("setup_reference: playwright", m.version("playwright"))'
