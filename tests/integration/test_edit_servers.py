"""Instruction edits against real servers: llama-server with the project's tiny model (its
ChatML chat template serves /v1/chat/completions; greedy decoding writes "x" until the token
limit), and vLLM's chat endpoint with the tiny HF model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_copilot.config import load_config
from local_copilot.health.report import collect
from local_copilot.instruct.chat import ChatChunk, chat_backend
from local_copilot.instruct.prompt import EditSpec, build
from local_copilot.servers.llama_cpp import LlamaServer
from local_copilot.servers.ports import free_port

from ..fakes.fake_chat import FakeChat, chat_sse
from ..helpers import wait_for
from ..launch import suite_options
from .nvim_session import attach_ui, buffer_text, lua, screen_lines

pytestmark = pytest.mark.integration

LINES = ["def add(a, b):", "    return a + b", "", "print(add(1, 2))"]
N = 12  # edit.n_predict: the tiny model's answer is N x's


@pytest.fixture(scope="module")
def two_slots(models: dict[str, Path], llama_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The deterministic tiny model on a llama-server with two slots (two edits at once)."""
    log = tmp_path_factory.mktemp("edit-llama") / "server.log"
    with LlamaServer.for_model(models["x"], binary=llama_bin, log_file=log, options=suite_options(parallel=2)) as server:
        yield server


@pytest.fixture()
def open_nvim(open_nvim: Callable[..., Any], tmp_path: Path) -> Callable[..., Any]:
    """conftest's open_nvim at 100x24 with a UI, no automatic ghost text, edits of N tokens,
    and LINES in a file."""

    def make(setup: dict[str, Any]) -> Any:
        nvim = open_nvim({"auto_trigger": False, "edit": {"n_predict": N}, **setup}, columns=100, lines=24)
        attach_ui(nvim, 100, 24)
        path = tmp_path / "sample.py"
        path.write_text("\n".join(LINES) + "\n")
        nvim.command(f"edit {path}")
        return nvim

    return make


def edit_state(nvim: Any, edit_id: int) -> str | None:
    return nvim.exec_lua("local e = require('local_copilot.edit').edits[...]; return e and e.state", edit_id)


def test_an_edit_end_to_end_with_llama_server(two_slots: LlamaServer, open_nvim: Callable[..., Any]) -> None:
    nvim = open_nvim({"backends": {"llama.cpp": {"url": two_slots.url}}})
    # the first edit starts the host and probes the server; the ones after it are what a
    # user feels once the plugin runs (reported, not asserted: the machine is shared)
    timings = []
    for line in (4, 4, 4, 4, 4, 1):
        edit_id = nvim.exec_lua("return require('local_copilot').edit(...)",
                                {"line1": line, "line2": line, "instruction": "fill it"})
        timings.append(wait_for(lambda: nvim.exec_lua(
            "return require('local_copilot.edit').first_line_ms(...)", edit_id), what="the first previewed line"))
        wait_for(lambda: edit_state(nvim, edit_id) == "done", what="the answer complete")
        if line == 4 and len(timings) < 5:
            nvim.command("normal! 4G")
            assert lua(nvim, "require('local_copilot').edit_cancel()") is True
    warm = sorted(timings[1:])
    print(f"first previewed line: cold {timings[0]:.0f} ms (host start, probe); then median "
          f"{warm[len(warm) // 2]:.1f} ms, max {warm[-1]:.1f} ms over {len(warm)} edits")
    screen = "\n".join(screen_lines(nvim))
    assert "x" * N in screen and f"stopped at the limit of {N} tokens" in screen
    assert buffer_text(nvim) == "\n".join(LINES)
    # two previews: the one at the cursor is accepted, then the other
    nvim.command("normal! 4G")
    assert lua(nvim, "require('local_copilot').edit_accept()") is True
    nvim.command("normal! 1G")
    assert lua(nvim, "require('local_copilot').edit_accept()") is True
    assert buffer_text(nvim) == "\n".join(["x" * N, "    return a + b", "", "x" * N])
    nvim.command("undo")
    assert buffer_text(nvim) == "\n".join(["def add(a, b):", "    return a + b", "", "x" * N])


def test_two_edits_run_at_once_on_two_slots(two_slots: LlamaServer, open_nvim: Callable[..., Any]) -> None:
    nvim = open_nvim({
        "backends": {"llama.cpp": {"url": two_slots.url}}, "edit": {"n_predict": 400}})
    ids = [nvim.exec_lua("return require('local_copilot').edit(...)",
                         {"line1": line, "line2": line, "instruction": "fill it"}) for line in (1, 4)]
    # both in flight at one moment: the server's slots both busy
    wait_for(lambda: sum(1 for s in httpx.get(two_slots.url + "/slots", timeout=5).json() if s.get("is_processing"))
             == 2, interval=0.005, what="two slots processing at once")
    for edit_id in ids:
        wait_for(lambda: edit_state(nvim, edit_id) == "done", what="done")


async def test_the_warm_up_fills_the_prompt_cache_the_edit_then_reuses(two_slots: LlamaServer) -> None:
    cfg = load_config({"backends": {"llama.cpp": {"url": two_slots.url}}}).active
    spec = EditSpec(path="a.py", ft="python", lines=["def f():", "    pass"], before=["import os"] * 40,
                    after=["# end"], instruction="return 1")
    async with httpx.AsyncClient(timeout=30) as client:
        chat = chat_backend("llama.cpp", cfg, client)
        limit = await chat.context_limit()
        assert limit and chat.warms
        warm = build(spec, limit, 8, warm=True)
        await chat.warm(warm.messages)
        real = build(spec, limit, 8)
        exchange = await chat.chat(real.messages, real.max_tokens, 0.0)
        chunks = [c async for c in exchange.chunks()]
        chat.close()
    text = "".join(c.text for c in chunks)
    assert text == "x" * 8
    assert any(isinstance(c, ChatChunk) and c.finish == "length" for c in chunks)
    [usage] = [c for c in chunks if c.prompt_tokens]
    assert usage.timings is not None
    cached, prompt = usage.timings["cache_n"], usage.prompt_tokens or 0
    print(f"prompt {prompt} tokens, {cached:.0f} of them from the warm-up's cache")
    # all but the instruction and the chat template's tail came from the cache (the tiny
    # vocabulary spells most text a byte per token)
    assert prompt > 800 and cached >= prompt - len(spec.instruction) - 32, (cached, prompt)


@pytest.mark.vllm
async def test_vllm_chat_endpoint(vllm_server: str) -> None:
    cfg = load_config({"backend": "vllm", "backends": {"vllm": {"url": vllm_server}}}).active
    spec = EditSpec(path="a.py", ft="python", lines=["def f():", "    pass"], instruction="return 1")
    async with httpx.AsyncClient(timeout=60) as client:
        chat = chat_backend("vllm", cfg, client)
        limit = await chat.context_limit()
        assert limit == 2048 and not chat.warms  # max_model_len from /v1/models
        prompt = build(spec, limit, 6)
        exchange = await chat.chat(prompt.messages, prompt.max_tokens, 0.0)
        chunks = [c async for c in exchange.chunks()]
        chat.close()
    assert "".join(c.text for c in chunks) == "x" * 6
    assert chunks[-1].done and any(isinstance(c, ChatChunk) and c.finish == "length" for c in chunks)


async def test_checkhealth_says_which_backend_answers_edits_and_whether_its_model_can(two_slots: LlamaServer) -> None:
    report = await collect({"backends": {"llama.cpp": {"url": two_slots.url}}}, editor=False)
    [section] = [s for s in report.sections if s.name == "instruction edits"]
    ok, warn = section.items
    assert ok.level == "ok" and "/v1/chat/completions answered" in ok.message and "tiny-x.gguf" in ok.message
    # the tiny model is named as a FIM model: edits get a hint to use an instruct model
    assert warn.level == "warn" and "base (FIM) model" in warn.message and "edit.backend" in warn.advice[0]


async def test_checkhealth_on_an_instruct_entry_and_on_one_that_is_down() -> None:
    fake = FakeChat([chat_sse(["ok"])], kind="openai")
    try:
        report = await collect({"edit": {"backend": "inst"}, "backends": {"inst": {"kind": "openai", "url": fake.url}}},
                               editor=False)
        [section] = [s for s in report.sections if s.name == "instruction edits"]
        assert [i.level for i in section.items] == ["ok"] and "fake-instruct" in section.items[0].message
    finally:
        fake.close()
    report = await collect({"backends": {"llama.cpp": {"url": f"http://127.0.0.1:{free_port()}"}}}, editor=False)
    [section] = [s for s in report.sections if s.name == "instruction edits"]
    [item] = section.items
    assert item.level == "warn" and "not answering" in item.message
