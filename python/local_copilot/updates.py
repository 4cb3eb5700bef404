"""The editor port: everything the core tells the editor, as one tagged union, and the
`Editor` protocol that receives it through one method, `update()`.

Each update is a Struct whose `type` names it. In Neovim (nvim/bridge.py) the host sends it
(msgpack, encoded once) to one Lua function, `require('local_copilot.updates').receive(...)`,
which dispatches on the tag (lua/local_copilot/updates.lua lists the same tags and describes
each with LuaCATS); several updates may go in one call. Another surface (`local-copilot
complete`, the language server) receives the same updates and keeps what it presents.

The shapes carried inside updates (a render plan, an edit's progress) are defined here too,
so this module imports nothing of the package: every part of the core may send updates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, get_args

import msgspec

__all__ = ["TAGS", "BackendReady", "BackendState", "Candidate", "EditProgress", "EditState", "EditUpdate", "Editor",
           "NextEditPlan", "Notice", "PrivacyRules", "PrivacyVerdict", "Render", "RenderPlan", "Resync", "Update",
           "UseChannel", "decode", "notices"]


class Candidate(msgspec.Struct, frozen=True):
    text: str
    words: list[int]  # byte offsets where accept-word stops (ghost/words.py)


class RenderPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What Lua draws of a suggestion (ghost.lua); built by ghost/engine.py."""

    buf: int
    tick: int  # Lua draws only if b:changedtick still equals this
    row: int  # 0-based
    col: int  # byte column of the cursor the suggestion starts at
    seq: int  # the snapshot's sequence number
    items: list[Candidate]  # one while streaming; the alternatives once fetched
    index: int = 0  # which item is shown
    final: bool = False  # the stream ended; no more updates for this seq
    cached: bool = False  # answered from the cache, no request made

    @property
    def text(self) -> str:
        return self.items[self.index].text if self.items else ""


EditState = Literal["waiting", "streaming", "done", "error"]


class EditUpdate(msgspec.Struct, frozen=True, kw_only=True):
    """What the editor draws for instruction edit `id` (pure data; lua/local_copilot/edit.lua;
    built by instruct/runner.py)."""

    id: int
    buf: int
    state: EditState
    lines: list[str] = []  # the answer's code so far (the whole replacement once 'done')
    tokens: int = 0  # generated so far
    elapsed_ms: int = 0
    message: str = ""  # why it failed ('error'), or a note on a 'done' answer
    truncated: bool = False  # the answer stopped at the token limit


class _Update(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", omit_defaults=True):
    pass


class Render(_Update, frozen=True, kw_only=True, tag="render"):
    """A suggestion to draw (ghost.lua). The plan is the engine's own Struct, carried as is:
    the keystroke path builds no copy of it."""

    plan: RenderPlan


class NextEditPlan(_Update, frozen=True, kw_only=True, tag="next_edit"):
    """A next edit to draw (next_edit.lua): rows/cols of the span it replaces, 0-based, for the
    request `seq` made at `cursor` while the buffer was at `tick`."""

    buf: int
    tick: int
    seq: int
    cursor: list[int]
    row: int
    col: int
    end_row: int
    end_col: int
    text: str
    old: str


class EditProgress(_Update, frozen=True, kw_only=True, tag="edit"):
    """An instruction edit's preview or outcome (edit.lua)."""

    update: EditUpdate


class BackendState(_Update, frozen=True, kw_only=True, tag="backend_state"):
    """The backend answers ('ok'), failed ('down'), asked to wait ('held': `message` is the
    time.time() the wait ends), is loading the model ('loading': `message` names it) or the
    options are rejected ('bad option': `message` says why)."""

    state: Literal["ok", "down", "held", "loading", "bad option"]
    message: str = ""


class BackendReady(_Update, frozen=True, kw_only=True, tag="backend_ready"):
    """A backend switch took effect (Lua fires the LocalCopilotBackendReady User autocmd)."""

    backend: str


class Notice(_Update, frozen=True, kw_only=True, tag="notice"):
    """One message for the user (message.lua fits it to the command line; the log has it whole)."""

    message: str
    level: str = "info"


class PrivacyVerdict(_Update, frozen=True, kw_only=True, tag="privacy_verdict"):
    """Why the privacy policy refuses buffer `buf`'s text (`kind` 'path' or 'content'), or, with
    no `reason`, that it no longer does."""

    buf: int
    path: str
    reason: str | None = None
    kind: str = "path"


class PrivacyRules(_Update, frozen=True, kw_only=True, tag="privacy_rules"):
    """The policy's path rules as [Lua pattern, reason] pairs (sent with each configuration)."""

    rules: list[list[str]]


class Resync(_Update, frozen=True, kw_only=True, tag="resync"):
    """The host lacks the window a one-line snapshot of `buf` was relative to: Lua sends the
    window whole next time."""

    buf: int


class UseChannel(_Update, frozen=True, kw_only=True, tag="use_channel"):
    """The host's worker connected to Neovim on a channel of its own (channel.py): Lua sends
    keystroke events there."""

    channel: int


class LspAnswer(_Update, frozen=True, kw_only=True, tag="lsp_answer"):
    """The answer to a request of Neovim's in-process language server (lsp.lua): `result` is
    the LSP result as plain data (None: nothing to offer)."""

    id: int
    result: Any = None


Update = (Render | NextEditPlan | EditProgress | BackendState | BackendReady | Notice | PrivacyVerdict | PrivacyRules
          | Resync | UseChannel | LspAnswer)

TAGS = frozenset(t.__struct_config__.tag for t in get_args(Update))  # updates.lua handles the same


class Editor(Protocol):
    """The editor port: what the core has to say goes through this one method."""

    def update(self, u: Update) -> None: ...


def notices(editor: Editor) -> Callable[[str, str], None]:
    """`editor`'s notices as a function of (message, level), for what takes one (notify.py's
    episodes, the model servers' manager)."""
    return lambda message, level: editor.update(Notice(message=message, level=level))


def decode(data: Any) -> Update:
    """An update from its builtins form (tests: what Lua would receive decodes as sent)."""
    update: Update = msgspec.convert(data, Update)
    return update
