#!/usr/bin/env bash
# Sets up the chat-model references the LLM tests compare parley against, in their own
# virtual environment .venv-llm (mlx-lm needs transformers 5.x, .venv-ref keeps 4.48 for
# Debian's torch): mlx-lm on mlx-cpu (the forward-pass oracle), tokenizers and
# transformers 5.x without torch (tokenizer.json and apply_chat_template), jinja2, gguf
# (writes GGUF fixtures), llguidance (the grammar engine's mask oracle). Every package is
# pinned (--no-deps: the list is the whole
# closure, as pip resolved it on 2026-12-04). Also unpacks the vocabulary GGUFs with their
# .inp/.out vectors and the chat templates from the pinned llama-cpp-python sdist into
# .venv-llm/share/llama.cpp/models, and installs that sdist built for this CPU (the GGUF
# reference of tests/parity/llm_llamacpp_test.py and bench/llm_cpu_llamacpp.py) from the
# wheel cache of scripts/llama_cpp_wheel.sh (built there on the first run, 7.5 min on 2
# cores; PARLEY_NO_LLAMA_CPP=1 skips it). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-llm
if [ ! -x "$venv/bin/python" ]; then
  echo "setup_llm_reference: creating $venv"
  /usr/bin/python3 -m venv "$venv"
fi

pins=(
  mlx==0.32.4 mlx-cpu==0.32.4 mlx-lm==0.32.2
  transformers==5.25.0 tokenizers==0.23.3 huggingface_hub==2.4.0 safetensors==0.8.0
  jinja2==3.1.6 markupsafe==3.0.4 gguf==0.19.0 numpy==2.4.6 sentencepiece==0.2.3
  protobuf==7.36.2 pyyaml==6.0.4 regex==2026.11.19 tqdm==4.70.1 packaging==26.4
  filelock==4.3.2 fsspec==2026.9.0 hf-xet==1.8.0 requests==2.34.2 urllib3==2.8.0
  certifi==2026.10.19.post1 charset-normalizer==3.5.3 idna==3.20 typer==0.29.2
  click==8.5.1 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0
  shellingham==1.5.4 annotated-doc==0.0.7 typing-extensions==4.16.0 httpx2==2.16.2
  httpcore2==2.16.2 h11==0.16.0 anyio==4.16.0 truststore==0.10.5 tomlkit==0.15.3
  kernels==0.19.1 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0
  typing-inspection==0.4.5 pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1
  diskcache==5.6.3  # llama-cpp-python's (with numpy, typing-extensions, jinja2 above)
  llguidance==1.9.1  # the grammar masks' oracle (tests/grammar, bench/grammar_masks.py); no deps
)
have=$("$venv/bin/python" -m pip freeze 2>/dev/null | tr 'A-Z_' 'a-z-' || true)
need=()
for pin in "${pins[@]}"; do
  key=$(echo "$pin" | tr 'A-Z_' 'a-z-')
  grep -qxF "$key" <<<"$have" || need+=("$pin")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup_llm_reference: pip installing ${need[*]}"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "${need[@]}"
fi

# llama.cpp's test vocabularies and chat templates (the sdist's vendor/llama.cpp/models).
sdist_version=0.3.36
sdist_sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
models="$venv/share/llama.cpp/models"
stamp="$models/.llama-cpp-python-$sdist_version"
if [ ! -f "$stamp" ]; then
  echo "setup_llm_reference: unpacking llama-cpp-python $sdist_version models/"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==$sdist_version"
  echo "$sdist_sha256  $tmp/llama_cpp_python-$sdist_version.tar.gz" | sha256sum -c --quiet
  rm -rf "$models" && mkdir -p "$models"
  tar xzf "$tmp/llama_cpp_python-$sdist_version.tar.gz" -C "$tmp" \
    --wildcards "*/vendor/llama.cpp/models/ggml-vocab-*" "*/vendor/llama.cpp/models/templates/*"
  cp -r "$tmp"/llama_cpp_python-"$sdist_version"/vendor/llama.cpp/models/. "$models/"
  touch "$stamp"
fi

# llama-cpp-python itself, from the wheel cache (--no-deps: its dependencies are pinned above).
installed=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("llama_cpp_python"))' 2>/dev/null || true)
if [ "${PARLEY_NO_LLAMA_CPP:-}" != 1 ] && [ "$installed" != "$sdist_version" ]; then
  wheel=$(scripts/llama_cpp_wheel.sh "$sdist_version" "$sdist_sha256" | tail -1)
  echo "setup_llm_reference: pip installing $wheel"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$wheel"
fi

"$venv/bin/python" -c 'import mlx.core, mlx_lm, transformers, tokenizers, jinja2, gguf; print("setup_llm_reference: mlx", mlx.core.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "jinja2", jinja2.__version__)'
if [ "${PARLEY_NO_LLAMA_CPP:-}" != 1 ]; then
  "$venv/bin/python" -c 'import llama_cpp; print("setup_llm_reference: llama_cpp", llama_cpp.__version__, llama_cpp.llama_print_system_info().decode().strip())'
fi
echo "setup_llm_reference: $(ls "$models"/ggml-vocab-*.gguf | wc -l) vocabularies, $(ls "$models"/templates/*.jinja | wc -l) templates in $models"
