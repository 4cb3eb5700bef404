"""The key of the text around the cursor, under which the suggestion cache (pipeline/cache.py)
keeps a finished suggestion. It uses only the lines near the cursor, so the same spot hits
even when the snapshot window has slid. Computed in parts, so a window kept between
keystrokes hashes its lines once (window.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import FimContext

__all__ = ["KEY_LINES_AFTER", "KEY_LINES_BEFORE", "context_key", "finish_key", "key_head", "key_tail"]

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
