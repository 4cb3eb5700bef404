"""Every message between the Lua side and the Python host, typed in one place.

Lua sends events as `vim.rpcnotify(chan, 'local_copilot_event', name, payload)`; the name is
the message's tag and the payload its fields (lua/local_copilot/protocol.lua lists the same
names). `decode(name, payload)` turns one into its Struct once; the plugin dispatches on the
type. What the host tells Lua is in updates.py: one tagged union, received by one Lua function.
"""

from __future__ import annotations

from typing import Any, get_args

import msgspec

from ..instruct.prompt import EditSpec
from ..snapshot import Snapshot

__all__ = [
    "LUA_TAKE_SHOWN", "NAMES", "Accepted",
    "EditRecord", "NextEditNote", "NextEditRequest", "EditCancel", "EditRequest", "EditWarm",
    "Alternatives", "Backend", "Cancel", "Chunk", "ConfigMsg", "Definition", "DefinitionsMsg", "EditsMsg", "Forget",
    "Message", "RecentEdit",
    "PathChanged", "ProtocolViolation", "SnapshotMsg", "TypedThrough", "Warm", "Yank", "decode", "to_snapshot",
]


class ProtocolViolation(Exception):
    """An event whose name or fields are not in this module (a Lua side of another version)."""


class _Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    pass


class ConfigMsg(_Event, frozen=True, kw_only=True, tag="config"):
    """The user's options as given to setup() (validated by config.load_config). The only way
    options reach the host: Lua sends them before its next event whenever they changed."""

    options: Any = None  # a table; Lua sends an empty one as an array


class SnapshotMsg(_Event, frozen=True, kw_only=True, tag="snapshot"):
    """A keystroke's view of the buffer (see Snapshot). While the user types on one line Lua
    sends that `line` only, with `base` naming the seq of the whole window it belongs to."""

    buf: int
    tick: int
    row: int
    col: int
    first: int
    nlines: int = 0
    ft: str = ""
    path: str = ""
    et: bool = True
    sw: int = 4
    ts: int = 8
    seq: int = 0
    interval: float | None = None
    lines: list[str] | None = None
    base: int | None = None
    line: str | None = None
    # bytes of the cursor's line that Lua left out before its text (a long line is cut:
    # lua/local_copilot/trigger.lua); `col` counts from the line's real start
    line_from: int = 0
    # riding along: the suggestions Lua showed since its last request (the host counts them)
    shown: int = 0


class Alternatives(SnapshotMsg, frozen=True, kw_only=True, tag="alternatives"):
    """next()/prev() with one candidate known: fetch more for this spot."""


class Warm(SnapshotMsg, frozen=True, kw_only=True, tag="warm"):
    """The cursor rests at a new place in Normal mode: evaluate this place's prompt with nothing
    to generate, so the first key typed here finds it in the server's cache."""


class TypedThrough(SnapshotMsg, frozen=True, kw_only=True, tag="typed_through"):
    """The user typed part of the suggestion; `text` is what is left of it."""

    text: str = ""


class Backend(_Event, frozen=True, kw_only=True, tag="backend"):
    """:LocalCopilotBackend: switch to, stop or restart a backend entry (the active one when
    `name` is empty)."""

    action: str
    name: str = ""


class Chunk(_Event, frozen=True, kw_only=True, tag="chunk"):
    """Text of another buffer for cross-file context (around line `around` of `lines`)."""

    path: str
    lines: list[str]
    around: int | None = None


class Definition(msgspec.Struct, frozen=True, kw_only=True):
    """One definition a language server found: its file and its header with a short body (or
    the server's hover text where the file could not be read)."""

    path: str
    text: str


class DefinitionsMsg(_Event, frozen=True, kw_only=True, tag="definitions"):
    """The definitions of the names near the cursor in buffer `buf` (the file at `path`), as
    its language servers answered (lua/local_copilot/definitions.lua), in the order they were
    found, the newest last: they replace the ones sent before for the buffer."""

    buf: int
    path: str = ""
    items: list[Definition] = []


class RecentEdit(msgspec.Struct, frozen=True, kw_only=True):
    """A change the user finished in buffer `buf` (the file at `path`): the rows from `row` on
    are now `new`; `before` and `after` are the unchanged rows around them."""

    buf: int
    path: str
    row: int
    new: list[str]
    before: list[str] = []
    after: list[str] = []


class EditsMsg(_Event, frozen=True, kw_only=True, tag="edits"):
    """Changes the user finished, oldest first, as context for ghost text
    (lua/local_copilot/recent_edits.lua sends them apart from the keystrokes)."""

    edits: list[RecentEdit]


class Yank(_Event, frozen=True, kw_only=True, tag="yank"):
    path: str
    lines: list[str]


class Cancel(_Event, frozen=True, kw_only=True, tag="cancel"):
    """Insert mode left: stop what is in flight for the buffer."""

    buf: int


class Accepted(_Event, frozen=True, kw_only=True, tag="accepted"):
    kind: str  # 'full' | 'word' | 'line'


class Forget(_Event, frozen=True, kw_only=True, tag="forget"):
    """The buffer was wiped: its window and requests are of no use."""

    buf: int


class Switched(_Event, frozen=True, kw_only=True, tag="switched"):
    """Lua sends events on the worker's channel `channel` from now on; sent after every
    earlier event, on the channel those went on (plugin.py holds the new channel's until it)."""

    channel: int


class PathChanged(_Event, frozen=True, kw_only=True, tag="path_changed"):
    """The file at `path` was written, read or a buffer named so: where it resolves may have
    changed (a link made or moved), so the privacy policy judges it anew."""

    path: str


class EditRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One change the user made: rows `row`..`row+len(old)` of `path` were `old`, now `new`."""

    path: str
    row: int
    old: list[str]
    new: list[str]
    before: list[str] = []  # unchanged rows just above (the diff's context)
    after: list[str] = []  # and just below


class NextEditRequest(_Event, frozen=True, kw_only=True, tag="next_edit"):
    """Ask for the next edit around the cursor (a window of the buffer), with the changes
    recorded since the last request."""

    buf: int
    tick: int
    row: int
    col: int
    first: int
    lines: list[str]
    nlines: int = 0
    path: str = ""
    ft: str = ""
    seq: int = 0
    cwd: str = ""  # the prompt names files relative to it
    edits: list[EditRecord] = []
    # the buffer's 'expandtab', 'shiftwidth', 'tabstop': the edit's indentation is written so
    et: bool | None = None
    sw: int = 0
    ts: int = 8


class NextEditNote(_Event, frozen=True, kw_only=True, tag="next_edit_note"):
    """A next edit was shown, accepted or dismissed (the host counts them)."""

    what: str


class EditRequest(_Event, frozen=True, kw_only=True, tag="edit_request"):
    """Instruction edit `id` (Lua's own numbering) in buffer `buf` (a new one, a retry or a
    follow-up): `spec` is the selection, the code around it and the instruction."""

    id: int
    buf: int
    attempt: int = 0  # retries of this edit so far (a retry samples more freely)
    spec: EditSpec


class EditWarm(_Event, frozen=True, kw_only=True, tag="edit_warm"):
    """An edit's instruction is being typed: the prompt without it may be evaluated now."""

    buf: int
    spec: EditSpec


class EditCancel(_Event, frozen=True, kw_only=True, tag="edit_cancel"):
    """Stop edit `id` of buffer `buf` (its preview was dismissed or accepted)."""

    buf: int
    id: int


Message = (ConfigMsg | SnapshotMsg | Alternatives | TypedThrough | Warm | Backend | Chunk | DefinitionsMsg | EditsMsg | Yank
           | Cancel
           | Accepted | Forget | Switched
           | PathChanged | NextEditRequest | NextEditNote | EditRequest | EditWarm | EditCancel)

_TYPES: dict[str, type[_Event]] = {t.__struct_config__.tag: t for t in get_args(Message)}
NAMES = frozenset(_TYPES)  # lua/local_copilot/protocol.lua lists the same (tests/integration/test_protocol.py)


def decode(name: str, payload: Any) -> Message:
    """The event `name` with `payload` as its Struct; ProtocolViolation when it is not one."""
    kind = _TYPES.get(name)
    if kind is None:
        raise ProtocolViolation(f"unknown event {name!r}")
    if kind is ConfigMsg:
        payload = {"options": payload}
    try:
        return msgspec.convert(payload, kind)  # type: ignore[return-value]
    except msgspec.ValidationError as exc:
        raise ProtocolViolation(f"event {name!r}: {exc}") from None


def to_snapshot(msg: SnapshotMsg, lines: list[str]) -> Snapshot:
    """The engine's Snapshot of a snapshot message whose window is `lines`."""
    return Snapshot(buf=msg.buf, tick=msg.tick, row=msg.row, col=msg.col, first=msg.first, lines=lines,
                    nlines=msg.nlines, ft=msg.ft, path=msg.path, et=msg.et, sw=msg.sw, ts=msg.ts, seq=msg.seq,
                    interval=msg.interval, line_from=msg.line_from)


# -- host -> Lua ------------------------------------------------------------------------------
# What the host tells Lua is one tagged union of updates (updates.py). The one question it asks
# Lua, synchronously, is how many suggestions were shown since Lua last said:
LUA_TAKE_SHOWN = "return require('local_copilot.trigger').take_shown()"
