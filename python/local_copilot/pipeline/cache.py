"""A small LRU of finished suggestions keyed by the text around the cursor.

The key uses only the lines near the cursor, so the same spot hits even when the snapshot
window has slid (after accepting a multi-line suggestion the window starts lower).
Backspacing and retyping, or accepting a suggestion that was prefetched, cost no request.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (prompt/window.py imports this module)
    from ..prompt.context import FimContext

__all__ = ["SuggestionCache", "context_key"]

KEY_LINES_BEFORE = 32
KEY_LINES_AFTER = 16


def context_key(ctx: FimContext) -> str:
    return finish_key(key_head(ctx.prev_lines, ctx.path), ctx.middle, ctx.line_suffix, key_tail(ctx.next_lines))


# context_key in parts, so a window kept between keystrokes hashes its lines once (window.py)
def _lines(lines: Sequence[str]) -> bytes:
    # counted: the joins of [] and of [""] are the same bytes (row 0, or under an empty line)
    return f"{len(lines)}\x00".encode() + "\n".join(lines).encode("utf-8", "surrogateescape") + b"\x00"


def key_head(prev_lines: Sequence[str], path: str = "") -> Any:
    """The hash state after the file's path and the lines above the cursor (two files can hold
    the same text around the cursor; their prompts name different files)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(path.encode("utf-8", "surrogateescape") + b"\x00" + _lines(prev_lines[-KEY_LINES_BEFORE:]))
    return h


def key_tail(next_lines: Sequence[str]) -> bytes:
    return _lines(next_lines[:KEY_LINES_AFTER])


def finish_key(head: Any, middle: str, line_suffix: str, tail: bytes) -> str:
    h = head.copy()
    h.update(middle.encode("utf-8", "surrogateescape") + b"\x00")
    h.update(line_suffix.encode("utf-8", "surrogateescape") + b"\x00")
    h.update(tail)
    return str(h.hexdigest())


class SuggestionCache:
    def __init__(self, size: int = 256) -> None:
        self.size = size
        # key -> (text, partial): a partial text is the quick first part of a suggestion whose
        # rest was not fetched yet (the engine continues it when it is shown again)
        self._items: OrderedDict[str, tuple[str, bool]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> str | None:
        item = self._items.get(key)
        if item is None:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return item[0]

    def is_partial(self, key: str) -> bool:
        item = self._items.get(key)
        return item is not None and item[1]

    def put(self, key: str, text: str, *, partial: bool = False) -> None:
        self._items[key] = (text, partial)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()
