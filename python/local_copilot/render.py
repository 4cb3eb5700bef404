"""What Python tells Lua to draw: pure data, one plan per update."""

from __future__ import annotations

import msgspec

__all__ = ["RenderPlan"]


class RenderPlan(msgspec.Struct, frozen=True, kw_only=True):
    buf: int
    tick: int  # Lua draws only if b:changedtick still equals this
    row: int  # 0-based
    col: int  # byte column of the cursor the suggestion starts at
    seq: int  # the snapshot's sequence number
    text: str  # the suggestion; "" clears
    final: bool = False  # the stream ended; no more updates for this seq
