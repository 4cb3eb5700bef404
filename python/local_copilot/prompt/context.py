"""Snapshot -> FIM context: the text before and after the cursor, cut to whole lines."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ..snapshot import Snapshot

__all__ = ["FimContext", "build_context", "join_prefix", "join_suffix"]


class FimContext(msgspec.Struct, frozen=True, kw_only=True):
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
    cut = snap.char_col
    above = snap.lines[max(0, idx - lines_before) : idx]
    below = snap.lines[idx + 1 : idx + 1 + lines_after]
    line_suffix = line[cut:]
    return FimContext(
        prefix=join_prefix(above),
        middle=line[:cut],
        suffix=line_suffix + join_suffix(below),
        line_suffix=line_suffix,
        prev_lines=tuple(above),
        next_lines=tuple(below),
        indent=indent_width(line, snap.ts),
        indent_chars=len(line) - len(line.lstrip(" \t")),
        path=snap.path,
        filetype=snap.ft,
    )
