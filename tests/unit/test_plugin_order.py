"""The host hands the engine a buffer's snapshots oldest first, whichever channel each came on
(LocalCopilotPlugin._submit). Against a FAKE llama.cpp server."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from local_copilot.config import load_config
from local_copilot.ghost.engine import Engine
from local_copilot.nvim.plugin import LocalCopilotPlugin

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import infill_stream, llama
from .test_engine import snap, wait_until


async def test_a_snapshot_older_than_one_already_submitted_is_dropped(fake: Any) -> None:
    # while Lua switches to the worker's channel, the last snapshot sent on the host's channel
    # reaches the worker loop a hop later than a newer one read on the worker's own
    server = fake(llama(infill_stream(["ok"])))
    editor = RecordingEditor()
    engine = Engine(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url, "fim_template": "qwen"}},
                                  "speculative": False}))
    plugin = LocalCopilotPlugin(None)  # type: ignore[arg-type]  (no Neovim: only the hand-over)
    plugin._running = SimpleNamespace(engine=engine)  # type: ignore[assignment]  (only the engine is used)
    plugin._submit(snap(7, "x = ab"))
    plugin._submit(snap(6, "x = a"))  # the older one, late
    await wait_until(lambda: any(p.final and p.seq == 7 for p in editor.plans))
    prompts = [b["prompt"].split("<|fim_middle|>")[1] for p, b in server.requests if p == "/completion"]
    assert prompts == ["x = ab"] and {p.seq for p in editor.plans} == {7}
    plugin._forget(1)  # a wiped buffer starts over: its next snapshot is taken whatever its seq
    plugin._submit(snap(3, "x = abc"))
    await wait_until(lambda: any(p.final and p.seq == 3 for p in editor.plans))
    await engine.close()
