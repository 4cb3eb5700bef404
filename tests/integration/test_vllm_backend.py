"""The OpenAI-compatible backend against a real vLLM (CPU build) with the tiny model."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest

from local_copilot.backends import FimRequest, OpenAIBackend
from local_copilot.config import load_config

from ..helpers import wait_for
from .nvim_session import start_nvim, wait_ghost

pytestmark = [pytest.mark.integration, pytest.mark.vllm]


def metric(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    m = re.search(rf"^vllm:{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
    assert m, f"vllm:{name} not in /metrics"
    return float(m.group(1))


def backend(url: str, client: httpx.AsyncClient) -> OpenAIBackend:
    cfg = load_config({"backend": "vllm", "backends": {"vllm": {"url": url}}}).active
    return OpenAIBackend("vllm", cfg, client)


async def test_fim_completion_detects_the_template_and_context(vllm_server: str) -> None:
    async with httpx.AsyncClient(timeout=60) as client:
        b = backend(vllm_server, client)
        assert await b.context_limit() == 2048  # max_model_len from /v1/models
        assert b.template is not None and b.template.name == "qwen"  # from the model name
        req = FimRequest(prefix="def f():\n", middle="    return ", suffix="\n", n_predict=6)
        chunks = [c async for c in b.complete(req)]
    assert "".join(c.text for c in chunks) == "xxxxxx"
    assert any(c.prompt_tokens for c in chunks)  # the usage chunk with empty choices
    assert chunks[-1].done


async def test_closing_the_stream_aborts_the_request_in_vllm(vllm_server: str) -> None:
    before = metric(vllm_server, "generation_tokens_total")
    async with httpx.AsyncClient(timeout=60) as client:
        b = backend(vllm_server, client)
        req = FimRequest(prefix="a\n", middle="b", suffix="", n_predict=1900)
        stream = b.complete(req)
        async for chunk in stream:
            if chunk.text:
                break
        await stream.aclose()  # type: ignore[attr-defined]
    for _ in range(300):
        if metric(vllm_server, "num_requests_running") == 0:
            break
        await asyncio.sleep(0.02)
    assert metric(vllm_server, "num_requests_running") == 0
    generated = metric(vllm_server, "generation_tokens_total") - before
    print("vLLM tokens generated after cancel:", generated)
    assert generated < 1900 / 2, generated


def test_ghost_text_from_vllm_in_neovim(vllm_server: str, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backend": "vllm", "backends": {"vllm": {"url": vllm_server}}, "n_predict": 6, "debounce_ms": 0,
    })
    try:
        nvim.command(f"edit {tmp_path / 'a.py'}")
        nvim.input("ivalue = ")
        assert wait_ghost(nvim, lambda t: t == "xxxxxx", timeout=60) == "xxxxxx"
    finally:
        nvim.close()


def test_resting_at_a_new_place_fills_vllms_prefix_cache_for_the_first_key(
        vllm_server: str, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    """vLLM keeps a prompt's whole blocks (prefix caching, its default): the cursor resting at a
    new place in Normal mode has it evaluate that place's prompt, so the first key typed there
    finds its blocks cached. (A first request that is the only one at that place could find
    nothing cached.)"""
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backend": "vllm", "backends": {"vllm": {"url": vllm_server}}, "n_predict": 4, "debounce_ms": 0})
    try:
        path = tmp_path / "rest.py"
        path.write_text("".join(f"def scale_{i}(value):\n    return value * {i}\n" for i in range(150)))
        nvim.command(f"edit {path}")
        nvim.input("A")  # a first suggestion (at the file's top) starts the host; a warm-up never does
        wait_ghost(nvim, bool, timeout=60)
        nvim.input("<Esc>")
        status = lambda: nvim.call("LocalCopilotCall", "status")["stats"]["counters"]  # noqa: E731
        warmups = status().get("warmups", 0)
        nvim.input("250G")
        wait_for(lambda: status().get("warmups", 0) == warmups + 1, timeout=60, what="a warm-up at line 250")
        wait_for(lambda: metric(vllm_server, "num_requests_running") == 0, timeout=60, what="the warm-up done")
        cached = metric(vllm_server, "prompt_tokens_cached_total")
        nvim.input("ox")
        wait_ghost(nvim, bool, timeout=60)
        assert metric(vllm_server, "prompt_tokens_cached_total") - cached >= 16, "the warm-up's blocks were not reused"
    finally:
        nvim.close()
