"""A llama-swap-style proxy (issue 37): the model a request names picks the llama-server, the
first request for a model waits while the proxy starts its server. llama-swap itself cannot be
installed here: tests/fakes/fake_llama_swap.py follows its published routes, in front of REAL
tiny llama-servers that it starts and swaps as llama-swap does.

While the proxy loads the entry's model the plugin shows `loading MODEL` and sends nothing but
a look at /running (each second, from Lua's retry), rather than a request that would wait for
the whole load: a real model takes longer to load than a request may wait (timeout_ms), and
each timeout would be a failure shown."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.devtools.tiny_model import write_gguf
from local_copilot.health.report import collect
from local_copilot.instruct.prompt import EditSpec

from ..conftest import PHRASE
from ..fakes.editor import RecordingEditor
from ..fakes.fake_llama_swap import FakeLlamaSwap
from ..helpers import wait_for
from ..unit.test_engine import snap, wait_until
from .nvim_session import start_nvim, wait_ghost
from .test_router import ask_until, first_suggestion

pytestmark = pytest.mark.integration

LOAD_S = 1.5  # how long the fake takes to start a model's server beyond the server's own start


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("swap-models")
    out = {"tiny-x": write_gguf(d / "tiny-x.gguf", favor="x"), "phrase": write_gguf(d / "phrase.gguf", phrase=PHRASE)}
    # a model file cut short: its llama-server exits at once
    out["broken"] = d / "broken.gguf"
    out["broken"].write_bytes(out["tiny-x"].read_bytes()[:100_000])
    return out


@pytest.fixture()
def swap(gguf: dict[str, Path], llama_bin: str, tmp_path: Path) -> Iterator[FakeLlamaSwap]:
    proxy = FakeLlamaSwap(gguf, binary=llama_bin, log_dir=tmp_path, load_delay_s=LOAD_S)
    yield proxy
    proxy.close()


async def test_ghost_text_through_the_proxy_shows_loading_meanwhile(swap: FakeLlamaSwap) -> None:
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config({"backend": "swap", "speculative": False, "n_predict": 6,
                                "backends": {"swap": {"url": swap.url, "model": "tiny-x"}}}))
    try:
        assert await first_suggestion(core, editor) == "xxxxxx"
    finally:
        await core.close()
    # the status said `loading tiny-x` while the proxy started it; no message, no failure
    assert editor.states[0] == "loading" and editor.states[-1] == "ok" and "down" not in editor.states, editor.states
    assert editor.notes == []
    paths = [(m, p) for m, p, _ in swap.requests]
    # one load started (the proxy's own wait), however often the editor asked meanwhile
    assert paths.count(("GET", "/upstream/tiny-x/health")) == 1
    # llama-server's own routes through /upstream, the completion by its `model`
    assert ("GET", "/upstream/tiny-x/props") in paths and ("POST", "/upstream/tiny-x/tokenize") in paths
    [completion] = swap.bodies("/completion")
    assert completion["model"] == "tiny-x" and swap.started == ["tiny-x"]
    # doctor lists the proxy's models (/v1/models), loaded as its /running says
    report = await collect({"backend": "swap", "backends": {"swap": {"url": swap.url, "model": "tiny-x"}}},
                           editor=False)
    [section] = [s for s in report.sections if s.name == "backend swap (active)"]
    said = [i.message for i in section.items]
    assert "the server serves 3 models: broken (unloaded), phrase (unloaded), tiny-x (loaded)" in said, said


async def test_a_model_the_proxy_cannot_start_is_one_message_not_loading_for_ever(swap: FakeLlamaSwap) -> None:
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config({"backend": "swap", "speculative": False,
                                "backends": {"swap": {"url": swap.url, "model": "broken"}}}))
    try:
        seq = await ask_until(core, lambda: bool(editor.notes))
        for i in range(3):  # the keys after it: no more starts, no more messages
            core.ghost.submit(snap(seq + 1 + i, "x = "))
            await wait_until(lambda: not any(core.state(1).in_flight().values()), timeout=10)
    finally:
        await core.close()
    [(message, _)] = editor.notes
    assert message.startswith("local-copilot: swap: the server could not load broken: HTTP 500: error proxying "
                              "request: unable to start process"), message
    assert editor.states[0] == "loading" and editor.states[-1] != "loading", editor.states
    assert [p for m, p, _ in swap.requests if p.startswith("/upstream/broken/health")] == ["/upstream/broken/health"]


async def test_an_instruction_edit_waits_while_the_proxy_starts_its_model(swap: FakeLlamaSwap) -> None:
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config({"backend": "swap", "edit": {"backend": "inst", "n_predict": 8},
                                "backends": {"swap": {"url": swap.url, "model": "phrase"},
                                             "inst": {"url": swap.url, "model": "tiny-x"}}}))
    spec = EditSpec(path="a.py", ft="python", lines=["def f():", "    pass"], before=[], after=[],
                    instruction="return 1")
    try:
        core.edits.request(1, 3, spec)
        await wait_until(lambda: any(u.state in ("done", "error") for u in editor.edits), timeout=60)
    finally:
        await core.close()
    # the preview said what it waited for, then showed the tiny-x model's answer (x's)
    assert any(u.state == "waiting" and u.message == "the server is loading tiny-x" for u in editor.edits)
    assert editor.edits[-1].state == "done" and editor.edits[-1].lines == ["x" * 8], editor.edits[-1]
    assert editor.notes == []
    [chat] = swap.bodies("/v1/chat/completions")
    assert chat["model"] == "tiny-x" and swap.started == ["tiny-x"]


def test_the_model_command_swaps_the_proxys_model(swap: FakeLlamaSwap, nvim_bin: str, manifest: Path,
                                                   nvim_env: dict[str, str], tmp_path: Path) -> None:
    """In Neovim: the statusline's `loading tiny-x`, the ghost text, then `:LocalCopilotBackend
    model phrase` (completed from the proxy's /v1/models): the proxy swaps to phrase."""
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "debounce_ms": 0, "adaptive_debounce": False, "n_predict": 4, "speculative": False,
        "backend": "swap", "backends": {"swap": {"url": swap.url, "model": "tiny-x"}}})

    def messages() -> str:
        return nvim.exec_lua("return vim.fn.execute('messages')")

    try:
        # completed before anything else reached the host (it starts for this, and gets the options with it)
        assert nvim.call("getcompletion", "LocalCopilotBackend model ", "cmdline") == ["broken", "phrase", "tiny-x"]
        nvim.command(f"edit {tmp_path / 'a.py'}")
        nvim.input("ia = ")
        wait_for(lambda: nvim.exec_lua("return require('local_copilot').status()") == "loading tiny-x",
                 interval=0.02, timeout=30, what="the status while the proxy loads tiny-x")
        assert wait_ghost(nvim, lambda t: t == "xxxx", timeout=60) == "xxxx"
        # while it loaded: a look at /running now and then (the keys typed, then Lua's retry each
        # second), one load, no completion request waiting out its timeout
        before = [(m, p) for m, p, _ in swap.requests]
        before = before[:before.index(("POST", "/completion"))]
        print(f"requests while tiny-x loaded: {before}")
        assert before.count(("GET", "/running")) <= 4 + (LOAD_S + 2) * 2, before
        assert before.count(("GET", "/upstream/tiny-x/health")) == 1
        nvim.input("<Esc>")
        nvim.command("LocalCopilotBackend model phrase")
        wait_for(lambda: "swap uses model phrase" in messages(), timeout=30, what="the model set")
        nvim.input("ob = ")
        shown = wait_ghost(nvim, lambda t: bool(t) and "x" not in t, timeout=60)
        assert shown in PHRASE, shown
        # llama-swap's default: one model at a time, the other stopped
        assert swap.started == ["tiny-x", "phrase"] and list(swap.servers) == ["phrase"]
        assert "error" not in messages().lower(), messages()
    finally:
        nvim.close()
