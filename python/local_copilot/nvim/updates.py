"""Everything the host tells Lua, as one tagged union.

Each update is a Struct whose `type` names it; the host sends it (msgpack, encoded once) to
one Lua function, `require('local_copilot.updates').receive(...)`, which dispatches on the
tag (lua/local_copilot/updates.lua lists the same tags and describes each with LuaCATS).
Several updates may go in one call: the pynvim path sends what piled up during one hop.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import msgspec

from ..ghost.render import RenderPlan
from ..instruct.runner import EditUpdate

__all__ = ["RECEIVE", "TAGS", "BackendReady", "BackendState", "EditProgress", "NextEditPlan", "Notice", "PrivacyRules",
           "PrivacyVerdict", "Render", "Resync", "Update", "UseChannel", "decode"]

# the one Lua function the host calls; it takes one update or several
RECEIVE = "require('local_copilot.updates').receive(...)"


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


Update = (Render | NextEditPlan | EditProgress | BackendState | BackendReady | Notice | PrivacyVerdict | PrivacyRules
          | Resync | UseChannel)

TAGS = frozenset(t.__struct_config__.tag for t in get_args(Update))  # updates.lua handles the same


def decode(data: Any) -> Update:
    """An update from its builtins form (tests: what Lua would receive decodes as sent)."""
    update: Update = msgspec.convert(data, Update)
    return update
