"""A suggestion's render plans as Lua draws them: the candidates (their text and where
accept-word stops), and the snapshot an accept of one leads to (the shapes, `RenderPlan` and
`Candidate`, are the editor port's: updates.py)."""

from __future__ import annotations

from ..snapshot import Snapshot, char_to_byte_col
from ..updates import Candidate, RenderPlan
from .words import word_stops

__all__ = ["Candidate", "RenderPlan", "accepted_snapshot", "candidate", "plan"]


def candidate(text: str) -> Candidate:
    return Candidate(text=text, words=word_stops(text))


def plan(snap: Snapshot, texts: list[str], *, final: bool, cached: bool = False) -> RenderPlan:
    """`texts` as the candidates shown at `snap`'s cursor (`final`: the request's last plan)."""
    return RenderPlan(buf=snap.buf, tick=snap.tick, row=snap.row, col=snap.col, seq=snap.seq,
                      items=[candidate(t) for t in texts], index=0, final=final, cached=cached)


def accepted_snapshot(snap: Snapshot, text: str) -> Snapshot:
    """The snapshot the editor would send right after accepting `text` at the cursor."""
    idx = snap.row - snap.first
    line = snap.line
    cut = snap.char_col
    new = (line[:cut] + text + line[cut:]).split("\n")
    lines = snap.lines[:idx] + new + snap.lines[idx + 1 :]
    last = new[-1]
    tail_len = len(line) - cut
    col_chars = len(last) - tail_len
    # (the cursor stays on a line whose start the editor left out while the text has one line)
    line_from = snap.line_from if len(new) == 1 else 0
    return Snapshot(
        buf=snap.buf, tick=-1, row=snap.row + len(new) - 1, col=line_from + char_to_byte_col(last, col_chars),
        first=snap.first, lines=lines, nlines=snap.nlines + len(new) - 1, ft=snap.ft, path=snap.path,
        et=snap.et, sw=snap.sw, ts=snap.ts, seq=-1, line_from=line_from,
    )
