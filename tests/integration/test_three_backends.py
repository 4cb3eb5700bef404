"""One typing session, three backends: the real llama-server and the real vLLM (each behind a
recording proxy, so the requests they received are asserted) and a FAKE Ollama (it cannot
be installed here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..fakes.fake_ollama import QWEN_TEMPLATE, fake_ollama
from ..fakes.recording_proxy import RecordingProxy
from .nvim_session import start_nvim, wait_ghost

pytestmark = pytest.mark.integration

LINES = ["import os", "", "def main():", "\tpath = ", "\treturn path"]


def session(nvim_bin: str, manifest: Path, env: dict[str, str], tmp_path: Path, setup: dict[str, Any],
            expect: str) -> str:
    """Type in a buffer; return the suggestion once it is complete."""
    nvim = start_nvim(nvim_bin, manifest, env, setup={"debounce_ms": 0, "adaptive_debounce": False,
                                                      "n_predict": 8, "speculative": False, **setup})
    try:
        nvim.command(f"edit {tmp_path / 'main.py'}")
        nvim.current.buffer[:] = LINES
        nvim.command("call cursor(4, 1)")
        nvim.input("Aos.")
        return wait_ghost(nvim, lambda t: t == expect, timeout=60)
    finally:
        nvim.close()


# what every backend's model sees for the cursor after "\tpath = os.": the typed text last
PROMPT = "<|fim_prefix|>import os\n\ndef main():\n<|fim_suffix|>\n\treturn path<|fim_middle|>\tpath = os."


def test_llama_cpp(llama_server: Any, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    proxy = RecordingProxy(llama_server.port)
    try:
        shown = session(nvim_bin, manifest, nvim_env, tmp_path, {"backends": {"llama.cpp": {"url": proxy.url}}}, "xxxxxxxx")
        assert shown == "xxxxxxxx"
        # the served vocabulary has Qwen's FIM tokens: the prompt is rendered here, the typed
        # text last; right after the key the first 6 tokens, then the rest continues that text
        bodies = proxy.bodies("/completion")
        body = [b for b in bodies if b["prompt"].endswith("\tpath = os.")][-1]
        assert body["prompt"] == PROMPT
        assert body["n_predict"] == 6 and body["cache_prompt"] is True
        # first parts stream until an answer's timings show the server writes 6 tokens within a
        # frame, then come unstreamed; so does the continuation, which it writes within 0.1 s
        firsts = [b["stream"] for b in bodies if b["n_predict"] == 6]
        assert firsts[0] is True and firsts == sorted(firsts, reverse=True)
        assert bodies[-1]["stream"] is False
        assert bodies[-1]["prompt"] == PROMPT + "xxxxxx" and bodies[-1]["n_predict"] == 2
        assert not proxy.bodies("/infill")
        assert body["n_indent"] == 1 and body["t_max_predict_ms"] == 500
    finally:
        proxy.close()


@pytest.mark.vllm
def test_vllm(vllm_server: str, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    proxy = RecordingProxy(int(vllm_server.rsplit(":", 1)[1]))
    try:
        shown = session(nvim_bin, manifest, nvim_env, tmp_path,
                        {"backend": "vllm", "backends": {"vllm": {"url": proxy.url}}}, "xxxxxxxx")
        assert shown == "xxxxxxxx"
        bodies = proxy.bodies("/v1/completions")
        body = [b for b in bodies if b["prompt"].endswith("\tpath = os.")][-1]
        assert body["prompt"] == PROMPT
        assert body["model"] == "tiny-qwen2-fim" and body["max_tokens"] == 6 and "suffix" not in body
        assert bodies[-1]["prompt"] == PROMPT + "xxxxxx" and bodies[-1]["max_tokens"] == 2
        assert body["stop"] == ["<|endoftext|>", "<|im_end|>", "<|fim_prefix|>", "<|fim_middle|>"]
        # the Qwen stop tokens, as ids of the served tokenizer (the tiny vocab, not Qwen's 151643...)
        assert body["stop_token_ids"] == [262, 264, 265, 266, 267, 268, 269, 270]
        assert body["skip_special_tokens"] is False and body["temperature"] == 0.1
    finally:
        proxy.close()


def test_ollama_fake(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    server = fake_ollama({"qwen2.5-coder:1.5b-base": {"family": "qwen2", "template": QWEN_TEMPLATE,
                                                      "capabilities": ["completion", "insert"]}}, ["xx", "xx"])
    try:
        shown = session(nvim_bin, manifest, nvim_env, tmp_path, {
            "backend": "ollama", "backends": {"ollama": {"url": server.url, "model": "qwen2.5-coder:1.5b-base"}}}, "xxxx")
        assert shown == "xxxx"
        body = [b for p, b in server.requests if p == "/api/generate"][-1]
        assert body["raw"] is True and body["prompt"].startswith("<|fim_prefix|>import os")
        assert body["prompt"] == PROMPT
        # the fake writes 4 characters in 2 chunks: less than the first part asked for, so the
        # suggestion is complete and nothing is continued
        assert body["options"]["num_predict"] == 6 and "<|fim_pad|>" in body["options"]["stop"]
        assert body["keep_alive"]
    finally:
        server.close()
