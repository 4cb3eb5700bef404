"""What the host tells Lua is one tagged union (updates.py): each update encodes with its tag
once and decodes back as itself; the Neovim editor port sends each through the one function."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import msgspec

from local_copilot import updates
from local_copilot.ghost.render import RenderPlan, candidate
from local_copilot.instruct.runner import EditUpdate
from local_copilot.nvim.bridge import RECEIVE, NvimEditor

PLAN = RenderPlan(buf=1, tick=3, row=0, col=2, seq=9, items=[candidate("foo bar")], final=True)
NEXT_EDIT = {"buf": 1, "tick": 4, "seq": 2, "cursor": [1, 11], "row": 1, "col": 11, "end_row": 1, "end_col": 12,
             "text": "width", "old": "w"}


class Channel:
    """The worker's own channel, as the editor port sees it: what it was given to run."""

    connected = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def lua(self, code: str, *args: Any) -> bool:
        self.calls.append((code, args))
        return True


def test_every_update_round_trips_with_its_tag() -> None:
    examples: list[updates.Update] = [
        updates.Render(plan=PLAN), msgspec.convert(NEXT_EDIT, updates.NextEditPlan),
        updates.EditProgress(update=EditUpdate(id=1, buf=1, state="streaming", lines=["x"])),
        updates.BackendState(state="down", message="refused"), updates.BackendReady(backend="b"),
        updates.Notice(message="hi", level="warn"), updates.PrivacyVerdict(buf=1, path="/a/.env", reason="secret"),
        updates.PrivacyRules(rules=[["%.env$", "secret"]]), updates.Resync(buf=1), updates.UseChannel(channel=4),
        updates.LspAnswer(id=3, result={"isIncomplete": True, "items": []}),
    ]
    assert {type(u).__struct_config__.tag for u in examples} == updates.TAGS
    for u in examples:
        wire = msgspec.msgpack.decode(msgspec.msgpack.encode(u))
        assert wire["type"] == type(u).__struct_config__.tag
        assert updates.decode(wire) == u
    # a verdict lifted leaves its reason out (Lua reads nil, not vim.NIL)
    assert "reason" not in msgspec.to_builtins(updates.PrivacyVerdict(buf=1, path="/a"))


def test_every_update_goes_through_the_one_function() -> None:
    # no Neovim: the worker's channel carries everything here
    editor = NvimEditor(SimpleNamespace(async_call=None))  # type: ignore[arg-type]
    channel = Channel()
    editor.channel, editor.worker_thread = channel, threading.current_thread()  # type: ignore[assignment]
    editor.update(updates.Render(plan=PLAN))
    updates.notices(editor)("hello", "warn")
    editor.update(updates.BackendState(state="ok"))
    editor.update(updates.PrivacyVerdict(buf=1, path="/a/.env", kind="path"))
    editor.update(updates.PrivacyRules(rules=[["%.env$", "secret"]]))
    editor.update(msgspec.convert(NEXT_EDIT, updates.NextEditPlan))
    editor.update(updates.EditProgress(update=EditUpdate(id=1, buf=1, state="done")))
    editor.update(updates.BackendReady(backend="b"))
    assert {code for code, _ in channel.calls} == {RECEIVE}
    sent = [args for _, args in channel.calls]
    assert all(len(args) == 1 for args in sent)
    assert [type(args[0]).__name__ for args in sent] == ["Render", "Notice", "BackendState", "PrivacyVerdict",
                                                       "PrivacyRules", "NextEditPlan", "EditProgress", "BackendReady"]
    assert sent[0][0].plan is PLAN  # the engine's plan is carried as is, not copied


def test_a_message_reaches_lua_bounded_and_without_control_characters() -> None:
    editor = NvimEditor(SimpleNamespace(async_call=None))  # type: ignore[arg-type]
    channel = Channel()
    editor.channel, editor.worker_thread = channel, threading.current_thread()  # type: ignore[assignment]
    said = "boom\x1b[31m" + "x" * 10_000
    editor.update(updates.Notice(message=said, level="error"))
    editor.update(updates.BackendState(state="down", message=said))
    editor.update(updates.EditProgress(update=EditUpdate(id=1, buf=1, state="error", message=said)))
    notice, state, edit = (args[0] for _, args in channel.calls)
    for message in (notice.message, state.message, edit.update.message):
        assert message.startswith("boom") and "\x1b" not in message and len(message) < len(said)
