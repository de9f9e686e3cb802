#!/usr/bin/env bash
# Sets up the openai-whisper reference that tests/parity compares parley against:
# Debian 12's CPU PyTorch and numba (PyPI's default torch pulls gigabytes of CUDA
# libraries), and a virtual environment .venv-ref on the system python that sees them,
# with openai-whisper and its remaining pure-python/small deps pinned from PyPI
# (--no-deps each, so pip never replaces Debian's torch/numba/numpy). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib/apt.sh

packages=(python3 python3-venv python3-numpy python3-torch python3-numba ffmpeg)
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
