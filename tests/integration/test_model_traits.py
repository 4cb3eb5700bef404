"""`local-copilot doctor` reads the served model's architecture from the server and says
what a hybrid or recurrent one costs per key (real llama-servers: the tiny Qwen2 model and a
tiny Mamba model, both generated here); an Ollama model whose template has no suffix slot is
told of (a fake Ollama: it cannot be installed here)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from local_copilot.devtools.tiny_mamba import write_mamba_gguf
from local_copilot.servers.llama_cpp import LlamaServer

from ..fakes.fake_ollama import QWEN_TEMPLATE, fake_ollama
from ..launch import suite_options
from .nvim_session import REPO

pytestmark = pytest.mark.integration


def doctor(tmp_path: Path, backends: dict[str, dict[str, str]], active: str) -> list[str]:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"backend": active, "backends": backends}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    res = subprocess.run([sys.executable, "-m", "local_copilot.cli", "doctor", "--config", str(config)],
                         capture_output=True, text=True, timeout=180, env=env, check=False)
    return [ln.strip() for ln in res.stdout.splitlines()]


def test_a_recurrent_model_is_warned_of_with_its_cost_per_key(llama_bin: str, tmp_path: Path) -> None:
    model = write_mamba_gguf(tmp_path / "tiny-mamba.gguf")
    with LlamaServer.for_model(model, binary=llama_bin, log_file=tmp_path / "server.log",
                               options=suite_options()) as server:
        lines = doctor(tmp_path, {"llama.cpp": {"url": server.url}}, "llama.cpp")
    warn = next((ln for ln in lines if "architecture is mamba" in ln), None)
    assert warn is not None, "\n".join(lines)
    assert warn.startswith("WARN   the model's architecture is mamba (from the GGUF header of the model file /props "
                           "names), a hybrid or recurrent one: llama-server cannot reuse chunks of a cached prompt for "
                           "it (\"cache reuse is not supported\", ggml-org/llama.cpp#18497).")
    # the cost, measured on this server
    assert re.search(r"; here [\d,]+ prompt tokens take [\d,]+ ms, so such a key waits about [\d,]+ ms per 1,000 "
                     r"tokens of prompt after the change$", warn), warn
    assert "- for ghost text use a transformer FIM model, e.g. Qwen2.5-Coder 1.5B or 7B " \
           "(llama-server --fim-qwen-1.5b-default, or --fim-qwen-7b-default)" in lines


def test_a_transformer_model_is_named_without_a_warning(llama_server: LlamaServer, tmp_path: Path) -> None:
    lines = doctor(tmp_path, {"llama.cpp": {"url": llama_server.url}}, "llama.cpp")
    assert ("INFO   model architecture: qwen2 (from the GGUF header of the model file /props names); llama-server "
            "reuses chunks of cached prompts for it (--cache-reuse)") in lines, "\n".join(lines)
    assert not any("hybrid or recurrent" in ln for ln in lines)


@pytest.mark.parametrize(("model", "info", "says"), [
    # qwen3-coder's template on Ollama is a chat template: no .Suffix; its name says Qwen's FIM
    ("qwen3-coder:30b", {"family": "qwen3moe", "template": "{{- if .Messages }}<|im_start|>{{ end }}{{ .Prompt }}"},
     "WARN   the model's Ollama template has no suffix slot (.Suffix): Ollama drops a request's suffix (the text "
     "after the cursor) for it, so the plugin renders the qwen FIM prompt itself and sends it raw"),
    ("my-base:1b", {"family": "llama", "template": "{{ .Prompt }}"},
     "WARN   the model's Ollama template has no suffix slot (.Suffix) and its name names no FIM format: the text "
     "after the cursor is not used (prompt style continue)"),
])
def test_an_ollama_template_without_a_suffix_slot_is_told(tmp_path: Path, model: str, info: dict[str, str],
                                                          says: str) -> None:
    server = fake_ollama({model: info}, ["x"])
    try:
        lines = doctor(tmp_path, {"ollama": {"url": server.url, "model": model}}, "ollama")
    finally:
        server.close()
    assert says in lines, "\n".join(lines)


def test_an_ollama_template_with_a_suffix_slot_draws_no_warning(tmp_path: Path) -> None:
    server = fake_ollama({"qwen2.5-coder:1.5b-base": {"family": "qwen2", "template": QWEN_TEMPLATE}}, ["x"])
    try:
        lines = doctor(tmp_path, {"ollama": {"url": server.url, "model": "qwen2.5-coder:1.5b-base"}}, "ollama")
    finally:
        server.close()
    assert not any("suffix slot" in ln for ln in lines), "\n".join(lines)
