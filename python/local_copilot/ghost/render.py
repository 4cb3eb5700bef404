"""What Python tells Lua to draw: pure data, one plan per update."""

from __future__ import annotations

import msgspec

from .words import word_stops

__all__ = ["Candidate", "RenderPlan", "candidate"]


class Candidate(msgspec.Struct, frozen=True):
    text: str
    words: list[int]  # byte offsets where accept-word stops (see words.py)


def candidate(text: str) -> Candidate:
    return Candidate(text=text, words=word_stops(text))


class RenderPlan(msgspec.Struct, frozen=True, kw_only=True):
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
