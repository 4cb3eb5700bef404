"""The host hands the engine a buffer's snapshots oldest first, whichever channel each came on
(LocalCopilotPlugin._submit). Against a FAKE llama.cpp server."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.nvim.plugin import LocalCopilotPlugin

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import infill_stream, llama
from .test_engine import snap, wait_until


async def test_a_snapshot_older_than_one_already_submitted_is_dropped(fake: Any) -> None:
    # while Lua switches to the worker's channel, the last snapshot sent on the host's channel
    # reaches the worker loop a hop later than a newer one read on the worker's own
    server = fake(llama(infill_stream(["ok"])))
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url, "fim_template": "qwen"}},
                                  "speculative": False}))
    plugin = LocalCopilotPlugin(None)  # type: ignore[arg-type]  (no Neovim: only the hand-over)
    plugin._running = SimpleNamespace(core=engine)  # type: ignore[assignment]  (only the core is used)
    plugin._submit(snap(7, "x = ab"))
    plugin._submit(snap(6, "x = a"))  # the older one, late
    await wait_until(lambda: any(p.final and p.seq == 7 for p in editor.plans))
    prompts = [b["prompt"].split("<|fim_middle|>")[1] for p, b in server.requests if p == "/completion"]
    assert prompts == ["x = ab"] and {p.seq for p in editor.plans} == {7}
    plugin._forget(1)  # a wiped buffer starts over: its next snapshot is taken whatever its seq
    plugin._submit(snap(3, "x = abc"))
    await wait_until(lambda: any(p.final and p.seq == 3 for p in editor.plans))
    await engine.close()


def test_a_whole_window_is_kept_even_when_its_snapshot_is_not_answered() -> None:
    # Lua owns the window: the one-line snapshots after a whole one name it as their base, so
    # the host keeps it whether or not it answers it (here: no options yet), and never asks
    # for it again
    plugin = LocalCopilotPlugin(None)  # type: ignore[arg-type]  (no Neovim: only the decoding)
    sent: list[Any] = []
    counted: list[Any] = []
    plugin._running = SimpleNamespace(  # type: ignore[assignment]  (only these are used)
        core=SimpleNamespace(stats=SimpleNamespace(count=lambda *a: counted.append(a))),
        editor=SimpleNamespace(update=sent.append))
    ran: list[tuple[Any, ...]] = []

    def run(fn: Any, *args: Any) -> None:
        ran.append((fn, *args))

    whole = {"buf": 1, "tick": 5, "row": 1, "col": 4, "first": 0, "nlines": 3, "seq": 1,
             "lines": ["def f():", "    x", "    return x"]}
    plugin._dispatch("snapshot", whole, run)
    assert ran == [] and sent == []  # no options: nothing asked
    plugin.config = load_config({})
    line = {"buf": 1, "tick": 6, "row": 1, "col": 5, "first": 0, "nlines": 3, "seq": 2, "base": 1, "line": "    xy"}
    plugin._dispatch("snapshot", line, run)
    assert sent == []  # no Resync
    [(fn, submitted)] = ran
    assert fn == plugin._submit
    assert submitted.lines == ["def f():", "    xy", "    return x"] and submitted.seq == 2
    # a base the host never had (a message lost): it asks for the window whole
    plugin._dispatch("snapshot", {**line, "seq": 3, "base": 9}, run)
    assert [type(u).__name__ for u in sent] == ["Resync"] and sent[0].buf == 1
