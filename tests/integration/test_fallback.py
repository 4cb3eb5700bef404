"""Fallback between servers (issue 37): a team entry that is down, or takes requests without
answering, hands ghost text to the local entry the user listed; once the team's server is up
again it answers again. Real llama-servers (the tiny models: the team's writes "x" forever, the
local one PHRASE); the server that takes requests and never answers is a fault-injection fake."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.pipeline.fallback import Chain
from local_copilot.servers.llama_cpp import LlamaServer, free_port

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import FakeServer, infill_stream, llama_props
from ..launch import suite_options
from ..unit.test_engine import snap, wait_until
from .nvim_session import start_nvim, wait_ghost

pytestmark = pytest.mark.integration



def options(team_url: str, local_url: str, **more: Any) -> dict[str, Any]:
    return {"backend": "team", "fallback": ["local"], "speculative": False, "n_predict": 8, **more,
            "backends": {"team": {"kind": "llama.cpp", "url": team_url},
                         "local": {"kind": "llama.cpp", "url": local_url}}}


async def local_alone(url: str) -> str:
    """What the local server suggests for the test's snapshot when it is the only entry."""
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config({"backends": {"llama.cpp": {"url": url}}, "speculative": False, "n_predict": 8}))
    try:
        text = await suggestion(core, editor, 1)
    finally:
        await core.close()
    assert text and "x" not in text  # (the team's model writes only x)
    return text


async def suggestion(core: Core, editor: RecordingEditor, seq: int) -> str:
    n = len(editor.final)
    core.ghost.submit(snap(seq, "x = "))
    await wait_until(lambda: len(editor.final) > n, timeout=30)
    return editor.final[-1]


async def test_a_team_server_that_is_down_hands_ghost_text_to_the_local_one(phrase_server: Any) -> None:
    local = await local_alone(phrase_server.url)
    editor = RecordingEditor()
    core = Core(editor)
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    core.configure(load_config(options(down, phrase_server.url)))
    try:
        assert await suggestion(core, editor, 1) == local
        assert await suggestion(core, editor, 2) == local
    finally:
        await core.close()
    # one message, when it switched; none per request
    [(message, level)] = editor.notes
    assert message.startswith("local-copilot: team cannot answer (") and message.endswith(": completing with local")
    assert "cannot reach" in message and level == "warn"
    team = core.stats.summary()["backends"]["team"]["counters"]
    assert team["errors"] == 1 and team["fallbacks"] == 1 and team["requests"] == 1
    assert "down" not in editor.states  # the status never said down: the local entry answered


async def test_a_team_server_that_does_not_start_answering_in_time_is_left_for_the_local_one(
        phrase_server: Any, silent_port: int) -> None:
    local = await local_alone(phrase_server.url)
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config(options(f"http://127.0.0.1:{silent_port}", phrase_server.url, fallback_after_ms=300)))
    try:
        assert await suggestion(core, editor, 1) == local
    finally:
        await core.close()
    [(message, _)] = editor.notes
    assert message == "local-copilot: team has not started answering within 300 ms: completing with local"


async def test_the_team_server_answers_again_once_it_is_up(phrase_server: Any, models: dict[str, Path],
                                                           llama_bin: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Chain, "RECHECK_S", 0.2)  # (the product asks every 10 s)
    local = await local_alone(phrase_server.url)
    port = free_port()
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config(options(f"http://127.0.0.1:{port}", phrase_server.url)))
    try:
        assert await suggestion(core, editor, 1) == local
        with LlamaServer.for_model(models["x"], options=suite_options(), binary=llama_bin, port=port,
                                   log_file=tmp_path / "team.log"):
            seq = 2
            # each request while the local entry answers lets the team's ready path be asked
            # (in the background); once it answered, the team answers the next request
            while await suggestion(core, editor, seq) == local:
                seq += 1
                await asyncio.sleep(0.1)
                assert seq < 100, "the team server never answered again"
            assert editor.final[-1].startswith("xxxx")
    finally:
        await core.close()
    assert [m for m, _ in editor.notes][1:] == ["local-copilot: team answers again: completing with it instead of local"]


class FakeLateLlama(FakeServer):
    """A FAKE llama-server (fault injection: a busy or far server), up and healthy, that starts
    each answer `first_token_s` after the request came; its model writes "slow"."""

    def __init__(self, first_token_s: float) -> None:
        self.first_token_s = first_token_s
        super().__init__(self._answer)

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[int, list[Any]]:
        if path == "/props":
            return 200, llama_props()
        if path == "/health":
            return 200, [b'{"status":"ok"}']
        return 200, [self.first_token_s, *infill_stream(["slow"])]


def test_a_slow_but_healthy_team_server_is_left_once_not_back_and_forth(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path, phrase_server: Any) -> None:
    # the team's server answers every request, 0.6 s after it came: later than fallback_after_ms
    slow = FakeLateLlama(0.6)
    nvim = start_nvim(nvim_bin, manifest, nvim_env,
                      setup=options(slow.url, phrase_server.url, fallback_after_ms=300, debounce_ms=0))
    try:
        nvim.command(f"edit {tmp_path / 'typing.py'}")
        nvim.input("i")
        # typing past two of the times the team's server is asked whether it is back
        end, n = time.monotonic() + 2.2 * Chain.RECHECK_S, 0
        while time.monotonic() < end:
            n += 1
            nvim.input(f"v{n} = ")
            drawn = wait_ghost(nvim)
            nvim.input("<Esc>o")
        messages = [ln for ln in nvim.exec_lua("return vim.fn.execute('messages')").splitlines() if "team" in ln]
    finally:
        nvim.close()
        slow.close()
    assert messages == ["local-copilot: team has not started answering within 300 ms: completing with local"]
    # the local entry answers (its model writes PHRASE, the team's "slow")
    assert drawn.endswith("ok") and "slow" not in drawn, drawn


async def test_one_late_answer_switches_nothing_most_late_ones_do_and_in_time_ones_bring_it_back(
        phrase_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Chain, "RECHECK_S", 0.2)  # (the product asks every 10 s)
    team = FakeLateLlama(0.0)
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config(options(team.url, phrase_server.url, fallback_after_ms=300)))
    seq = 0

    async def next_suggestion() -> str:
        """The suggestion for a new line (each its own: the cache answers none)."""
        nonlocal seq
        seq += 1
        n = len(editor.final)
        core.ghost.submit(snap(seq, f"v{seq} = "))
        await wait_until(lambda: len(editor.final) > n, timeout=30)
        return editor.final[-1]

    try:
        for _ in range(Chain.WINDOW):
            assert await next_suggestion() == "slow"
        # one late answer from a server that is usually in time is awaited, not left
        team.first_token_s = 0.6
        assert await next_suggestion() == "slow"
        assert editor.notes == []
        # late most of the time: left, once
        while await next_suggestion() == "slow":
            assert seq < 20, "the late team server was never left"
        assert [m for m, _ in editor.notes] == ["local-copilot: team has not started answering within 300 ms: "
                                                "completing with local"]
        # still up and still late: asked again and again (RECHECK_S), and not taken back
        asked = len(team.requests)
        while len(team.requests) < asked + 6:
            assert "ok" in await next_suggestion()  # (the local model's PHRASE)
            await asyncio.sleep(0.1)
        assert len(editor.notes) == 1
        # in time again: it answers again, said once
        team.first_token_s = 0.0
        while await next_suggestion() != "slow":
            await asyncio.sleep(0.1)
            assert seq < 200, "the team server never answered again"
    finally:
        await core.close()
        team.close()
    assert [m for m, _ in editor.notes] == [
        "local-copilot: team has not started answering within 300 ms: completing with local",
        "local-copilot: team answers again: completing with it instead of local"]
