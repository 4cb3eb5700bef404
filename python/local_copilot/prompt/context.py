"""Snapshot -> FIM context: the text before and after the cursor, cut to whole lines, each long
line cut to a bounded size (long_lines.py)."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ..snapshot import Snapshot
from .long_lines import cut_around, cut_lines

__all__ = ["FimContext", "build_context", "join_prefix", "join_suffix"]


class FimContext(msgspec.Struct, frozen=True, kw_only=True):
    # (a long line's text is cut, and marked, by long_lines.py)
    prefix: str  # whole lines above the cursor line, each ending in "\n"
    middle: str  # the cursor line up to the cursor
    suffix: str  # the rest of the cursor line, then the lines below
    line_suffix: str  # the rest of the cursor line alone
    prev_lines: tuple[str, ...]
    next_lines: tuple[str, ...]
    indent: int  # display width of the cursor line's leading whitespace
    indent_chars: int = 0  # the same, counted in characters (llama.cpp's n_indent counts these)
    path: str = ""
    filetype: str = ""


def indent_width(line: str, tabstop: int) -> int:
    """Display width of the leading spaces and tabs (a tab to the next multiple of `tabstop`;
    1 when tabstop is 0). In C: a loop here per character ran on every keystroke."""
    lead = line[:len(line) - len(line.lstrip(" \t"))]
    return len(lead.expandtabs(tabstop)) if "\t" in lead and tabstop > 0 else len(lead)


def join_prefix(lines: Sequence[str]) -> str:
    """Lines each ending in a newline (one C-level join: this runs per keystroke)."""
    return "\n".join(lines) + "\n" if lines else ""


def join_suffix(lines: Sequence[str]) -> str:
    """Lines each starting with a newline."""
    return "\n" + "\n".join(lines) if lines else ""


def build_context(snap: Snapshot, *, lines_before: int, lines_after: int) -> FimContext:
    idx = snap.row - snap.first
    line = snap.lines[idx]
    middle, line_suffix = cut_around(line, snap.char_col)
    above = cut_lines(snap.lines[max(0, idx - lines_before) : idx])
    below = cut_lines(snap.lines[idx + 1 : idx + 1 + lines_after])
    return FimContext(
        prefix=join_prefix(above),
        middle=middle,
        suffix=line_suffix + join_suffix(below),
        line_suffix=line_suffix,
        prev_lines=tuple(above),
        next_lines=tuple(below),
        # (a line whose start the editor left out has no indentation to tell)
        indent=0 if snap.line_from else indent_width(line, snap.ts),
        indent_chars=0 if snap.line_from else len(line) - len(line.lstrip(" \t")),
        path=snap.path,
        filetype=snap.ft,
    )
