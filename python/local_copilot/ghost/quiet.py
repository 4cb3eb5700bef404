"""False quiet answers: the model wrote a line, the rules showed nothing, and the user typed it.

A quiet answer (the post-processing left nothing of what the model wrote: it only repeated a
line around the cursor, or held an invisible character) is right when the line was junk and
wrong when it was the code the user wanted. The editor cannot run tests, but it sees what the
user types next: the line the gate hid, typed at the same place, is a false quiet answer
(`:LocalCopilot stats` counts both). What the gate hid is what the rules keep with the gate
off (postprocess/context.py's `rules`).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ..pipeline.postprocess import PostContext, process
from ..snapshot import Snapshot

__all__ = ["Hidden", "hidden", "verdict"]


class Hidden(msgspec.Struct, frozen=True):
    """The first line the hidden suggestion writes, as the buffer reads once it is typed: its
    row (the cursor's, or one below when the suggestion starts a new line) and text."""

    start: int  # the cursor's row when the answer came
    row: int
    line: str


def hidden(snap: Snapshot, raw: str, pctx: PostContext) -> Hidden | None:
    """What a quiet answer hid at `snap`'s cursor (None: nothing but blanks)."""
    text = process(raw, msgspec.structs.replace(pctx, rules="no_quiet"), final=True).text
    for k, line in enumerate(text.split("\n")):
        if line.strip():
            return Hidden(snap.row, snap.row + k, (snap.line[: snap.char_col] if k == 0 else "") + line)
    return None


def verdict(h: Hidden, snap: Snapshot) -> Literal["typed", "open", "gone"]:
    """`typed`: the hidden line now stands at its row; `open`: the user is still typing
    towards it (on its row, or on the rows the suggestion would have opened before it);
    `gone`: it holds something else, or is out of sight."""
    i = h.row - snap.first
    if not 0 <= i < len(snap.lines):
        return "gone"
    line = snap.lines[i].rstrip()
    if line == h.line.rstrip():
        return "typed"
    if (snap.row == h.row and h.line.startswith(line)) or h.start <= snap.row < h.row:
        return "open"
    return "gone"
