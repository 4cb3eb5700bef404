"""One edit from a rewritten region: the span that changed and its new text.

A next-edit model rewrites a whole region; what is shown and applied is only the part that
differs (the common start and end are cut off), so the edit sits where it applies. An answer
that rewrites the region beyond recognition is not an edit the user was about to make.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ..snapshot import char_to_byte_col

__all__ = ["Edit", "edit_between"]

# below this similarity (difflib's ratio) of old and new region, the answer is a rewrite, not an edit
MIN_SIMILARITY = 0.5


@dataclass(frozen=True)
class Edit:
    row: int  # where the replaced span starts (0-based row, byte column)
    col: int
    end_row: int  # where it ends (exclusive column)
    end_col: int
    text: str  # what replaces it ("\n" between lines)
    old: str  # what it replaces


def _trim_blank_tail(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def edit_between(start: int, old_lines: list[str], new_lines: list[str]) -> Edit | None:
    """The edit that turns region `old_lines` (buffer rows from `start`) into `new_lines`;
    None when they are equal or the new text is not recognisably the old one edited."""
    # a model often leaves out the blank rows that end a region: they are not an edit
    old_l, new_l = _trim_blank_tail(list(old_lines)), _trim_blank_tail(list(new_lines))
    old, new = "\n".join(old_l), "\n".join(new_l)
    if old == new:
        return None
    if difflib.SequenceMatcher(None, old, new, autojunk=False).ratio() < MIN_SIMILARITY:
        return None
    p = 0
    limit = min(len(old), len(new))
    while p < limit and old[p] == new[p]:
        p += 1
    s = 0
    while s < limit - p and old[len(old) - 1 - s] == new[len(new) - 1 - s]:
        s += 1
    row, col = _position(old, p, start)
    end_row, end_col = _position(old, len(old) - s, start)
    return Edit(row, col, end_row, end_col, new[p:len(new) - s], old[p:len(old) - s])


def _position(text: str, offset: int, start: int) -> tuple[int, int]:
    """(buffer row, byte column) of character `offset` in `text` (rows from `start`)."""
    before = text[:offset]
    nl = before.rfind("\n")
    return start + before.count("\n"), char_to_byte_col(before[nl + 1:], len(before) - nl - 1)
