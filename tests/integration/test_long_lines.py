"""A long line near the cursor is cut before it reaches the server (prompt/long_lines.py,
lua/local_copilot/trigger.lua), against the real llama-server with a small context (-c 2048,
so a prompt too long for it is refused for real) and the tiny model that writes "x", asked as
users ask it (the FIM template on /completion), seen through a recording proxy; in a real
headless Neovim and through `local-copilot complete`.

Before the cut, a 150 KB string literal four lines above the cursor made every request exceed
the server's context ('backend down', no ghost text), and a 1 MB line under the cursor went to
the server whole on every key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local_copilot.cli import main as cli
from local_copilot.prompt.long_lines import CUT_MARK, LINE_BYTES
from local_copilot.servers.llama_cpp import LlamaServer

from ..fakes.recording_proxy import RecordingProxy
from ..helpers import wait_for
from ..launch import suite_options
from .nvim_session import lua, start_nvim, wait_ghost

pytestmark = pytest.mark.integration

BIG = "S = '" + "a" * 150_000 + "'"
HUGE = "\tx = '" + "b" * 1_000_000 + "'"
# what one request may carry here: the window's lines, each cut, and the cursor's line cut
# around the cursor (2 KB before it, 512 bytes after)
BOUND = 8 * 1024


@pytest.fixture(scope="module")
def small_server(llama_bin: str, models: dict[str, Path],
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    d = tmp_path_factory.mktemp("small")
    # (the later -c wins over the recipe's)
    with LlamaServer.for_model(models["x"], binary=llama_bin, log_file=d / "server.log",
                               options=suite_options("-c", "2048")) as server:
        yield server


@pytest.fixture()
def upstream(small_server: LlamaServer) -> LlamaServer:
    """What `proxy` (conftest.py) stands in front of."""
    return small_server


def _setup(proxy: RecordingProxy) -> dict[str, Any]:
    return {"backends": {"llama.cpp": {"url": proxy.url}}, "debounce_ms": 0, "adaptive_debounce": False}


def _sizes(proxy: RecordingProxy) -> list[int]:
    return [len(json.dumps(body)) for body in proxy.bodies("/completion")]


def _xs(text: str) -> bool:
    return bool(text) and set(text) == {"x"}


def _status(nvim: Any) -> str:
    return str(lua(nvim, "require('local_copilot').status()"))


def test_a_150kb_line_four_lines_above_the_cursor_leaves_ghost_text_on_every_key(
        proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup=_setup(proxy))
    try:
        nvim.command(f"edit {tmp_path / 'data.py'}")
        nvim.current.buffer[:] = ["import os", BIG, "x = 1", "y = 2", "def f():", "\t"]
        nvim.command("call cursor(6, 1)")
        nvim.input("A")
        for key in "zqw":  # keys the suggestion does not continue: a new request each
            sent = len(proxy.bodies("/completion"))
            nvim.input(key)
            wait_for(lambda: len(proxy.bodies("/completion")) > sent, what="a request for the key")
            wait_ghost(nvim, _xs)
            assert _status(nvim) != "backend down"
        # the line went to the server cut, marked, with the lines between it and the cursor
        prompt = proxy.bodies("/completion")[-1]["prompt"]
        assert BIG[:LINE_BYTES] + CUT_MARK + "\nx = 1\ny = 2\ndef f():\n" in prompt
        assert max(_sizes(proxy)) < BOUND
    finally:
        nvim.close()


def test_a_1mb_line_under_the_cursor_sends_a_bounded_request_and_accepts_into_the_whole_line(
        proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup=_setup(proxy))
    try:
        nvim.command(f"edit {tmp_path / 'blob.py'}")
        nvim.current.buffer[:] = ["def f():", HUGE, "\treturn x"]
        col = 500_000  # bytes into the line: in the middle of the literal
        nvim.command(f"call cursor(2, {col + 1})")
        nvim.input("iq")
        text = wait_ghost(nvim, _xs)
        assert _status(nvim) != "backend down"
        sizes = _sizes(proxy)
        assert sizes and max(sizes) < BOUND, sizes
        # the line's text around the cursor went, cut at both ends, the line below after it
        prompt = proxy.bodies("/completion")[0]["prompt"]
        assert CUT_MARK + "b" * 16 in prompt and "b" * 16 + CUT_MARK + "\n\treturn x" in prompt
        # the part of the line Neovim sends the host on each key: a few KB around the cursor
        part, start = nvim.exec_lua("return { require('local_copilot.trigger').line_part(...) }", HUGE, col + 1)
        assert len(part) < 6 * 1024 and start > 0 and HUGE[start:start + len(part)] == part
        # accepted where the cursor is in the whole line, not in the part the host was sent
        assert lua(nvim, "require('local_copilot').accept()") is True
        # (the x's drawn by then: a continuation may have grown the suggestion since)
        wait_for(lambda: len(nvim.current.buffer[1]) > len(HUGE) + len(text), what="the suggestion accepted")
        got = nvim.current.buffer[:]
        n = len(got[1]) - len(HUGE) - 1
        want = ["def f():", HUGE[:col] + "q" + "x" * n + HUGE[col:], "\treturn x"]
        assert [len(line) for line in got] == [len(line) for line in want] and got == want
    finally:
        nvim.close()


def test_local_copilot_complete_cuts_a_1mb_line_under_the_cursor(
        tmp_path: Path, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    src = tmp_path / "blob.py"
    src.write_text("def f():\n" + HUGE + "\n\treturn x\n")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"backends": {"llama.cpp": {"url": proxy.url}}}))
    assert cli.main(["complete", f"{src}:2:500001", "--config", str(config)]) == 0
    out = capsys.readouterr()
    assert _xs(out.out.rstrip("\n")) and out.err == ""
    sizes = _sizes(proxy)
    assert sizes and max(sizes) < BOUND, sizes
