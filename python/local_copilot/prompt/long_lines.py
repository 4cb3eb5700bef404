"""Long lines cut to a bounded size before they enter a prompt.

A minified bundle, a data URI or a long string literal puts a megabyte on one line; whole-line
cuts (budget.py) cannot make such a line fit, and sent as it is it exceeds any server's context.
So every piece of every prompt passes through here first: the window around the cursor
(window.py, context.py), cross-file chunks and yanks (ring.py), next-edit history and context
(next_edit/), the code around an instruction edit's selection (instruct/prompt.py); the editor
cuts the same way before a line crosses the channel (lua/local_copilot/trigger.lua).

- A line other than the cursor's keeps its first LINE_BYTES bytes and ends with CUT_MARK.
- The cursor's line keeps up to BEFORE_BYTES before the cursor and AFTER_BYTES after it, the
  bytes nearest the cursor; a side that was cut is marked with CUT_MARK at its far end. The
  window's fitter cuts it shorter still when the server's context is small (window.py).

The limits are bytes: every tokenizer the estimate meets spends at least one byte per token
(TokenEstimator's floor), so a cut line costs at most that many tokens by the estimate,
whatever the learned ratio, and the cut does not move as the ratio drifts (the servers' prompt
caches keep hitting). Nothing here tokenizes or encodes more than a limit's worth of a line.

CUT_MARK is U+2026 HORIZONTAL ELLIPSIS: an elision to a reader and to a model trained on
text, and no operator or token of a programming language (Python's `...` is three ASCII dots).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["AFTER_BYTES", "BEFORE_BYTES", "CUT_MARK", "LINE_BYTES", "STEP", "cut_around", "cut_line",
           "cut_lines", "fit_line", "head", "tail"]

CUT_MARK = "\u2026"
LINE_BYTES = 512  # a line other than the cursor's
BEFORE_BYTES = 2048  # the cursor's line before the cursor
AFTER_BYTES = 512  # and after it
# the kept part before the cursor starts at a multiple of this many characters: it stays put
# while the user types on (the prompt's start is the same, and the server's cache keeps it)
STEP = 64


def head(text: str, limit: int) -> str:
    """The longest start of `text` of at most `limit` UTF-8 bytes, ending between characters."""
    if limit <= 0:
        return ""
    start = text[:limit]  # (at least `limit` bytes when it is `limit` characters)
    if start.isascii():  # (O(1) in CPython: the string knows)
        return start
    raw = start.encode("utf-8", "surrogateescape")
    if len(raw) <= limit:
        return start
    cut = limit
    while cut > 0 and raw[cut] & 0xC0 == 0x80:  # not inside a character
        cut -= 1
    return raw[:cut].decode("utf-8", "surrogateescape")


def tail(text: str, limit: int) -> str:
    """The longest end of `text` of at most `limit` UTF-8 bytes, starting between characters."""
    if limit <= 0:
        return ""
    end = text[-limit:]
    if end.isascii():
        return end
    raw = end.encode("utf-8", "surrogateescape")
    if len(raw) <= limit:
        return end
    start = len(raw) - limit
    while start < len(raw) and raw[start] & 0xC0 == 0x80:
        start += 1
    return raw[start:].decode("utf-8", "surrogateescape")


def _longer(text: str, limit: int) -> bool:
    """Whether `text` has more than `limit` UTF-8 bytes (without encoding more than 4 x limit)."""
    n = len(text)
    if n > limit:
        return True  # (a character is at least a byte)
    if n * 4 <= limit or text.isascii():
        return False
    return len(text.encode("utf-8", "surrogateescape")) > limit


def cut_line(line: str, limit: int = LINE_BYTES) -> str:
    """`line` itself, or its first `limit` bytes and CUT_MARK."""
    return head(line, limit) + CUT_MARK if _longer(line, limit) else line


def cut_lines(lines: Sequence[str], limit: int = LINE_BYTES) -> Sequence[str]:
    """`lines` themselves when none is longer than `limit` bytes (the usual case, found in C),
    else a list of them with the long ones cut (cut_line)."""
    longest = max(map(len, lines), default=0)
    if longest * 4 <= limit or (longest <= limit and "".join(lines).isascii()):
        return lines
    return [ln if len(ln) * 4 <= limit else cut_line(ln, limit) for ln in lines]


def cut_around(line: str, col: int, *, before: int = BEFORE_BYTES, after: int = AFTER_BYTES) -> tuple[str, str]:
    """The cursor line's text before character `col` and after it, each at most `before` /
    `after` bytes nearest the cursor, and CUT_MARK where it was cut. (The editor leaves out
    no more of a line than twice these, so a side it cut is cut here too, and marked.)"""
    middle, rest = line[:col], line[col:]
    if _longer(middle, before):
        kept = tail(middle, before)
        # what is kept starts at a multiple of `step` characters: the start stays put while
        # the user types on, and is never more than `before` bytes from the cursor
        step = max(1, min(STEP, before // 8))
        drop = len(middle) - len(kept)
        drop += -drop % step
        middle = CUT_MARK + middle[drop:]
    if _longer(rest, after):
        rest = head(rest, after) + CUT_MARK
    return middle, rest


_MARKS = 2 * len(CUT_MARK.encode())


def fit_line(middle: str, rest: str, room: int) -> tuple[str, str]:
    """The cursor line's two sides (as cut_around gave them) in at most `room` bytes together,
    marks included: the side after the cursor gets what it needs up to a quarter, the side
    before the rest (the model continues from there)."""
    have = len(middle) + len(rest)
    if have <= room and (have * 4 <= room or sum(map(_bytes, (middle, rest))) <= room):
        return middle, rest
    room = max(0, room - _MARKS)
    after = min(_bytes(rest), room // 4)
    return cut_around(middle + rest, len(middle), before=room - after, after=after)


def _bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogateescape"))
