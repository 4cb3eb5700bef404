"""Indentation written the buffer's way: the leading whitespace of model text that goes into a
buffer, in the spaces or tabs the buffer uses, at the width the model meant.

A model writes indentation as it saw it in its training text, which is not always the way of the
buffer it writes into: tabs under 'expandtab' (Python then refuses the file: TabError), four
spaces in a tab-indented file. Every surface inserts the suggestion as it is (ghost text, the
menu, the language server's items), so the text is put right once, where it is post-processed.

The rule:

- the style: spaces under 'expandtab', tabs (then spaces to the column) under 'noexpandtab';
  but where the indented lines around the cursor use the other (tabs in a buffer with
  'expandtab' set, as the Python ftplugin does for a tab-indented file; spaces and no tabs, or
  spaces past a tab stop, under Neovim's default 'noexpandtab'), the text's own style wins: text written the options'
  way beside them would mix tabs and spaces in one block. Where the options are not known (a
  language client, the CLI: LSP sends no indentation settings with a completion request), the
  lines around decide, and where none is indented the model's text is left as it is.
- the width: a tab the model wrote stands for one indentation level ('shiftwidth', or
  'tabstop' where it is 0) when the buffer is indented with spaces, as Neovim's own snippet
  expansion reads a tab under 'expandtab'; where the buffer is indented with tabs it is one of
  the buffer's tabs ('tabstop' columns). Where the options are not known the level is the step
  the lines around indent by. A space is one column.
- only leading whitespace changes, and a suggestion's first line only where it starts in the
  cursor line's indentation (text after other text on the line is not re-indented). Where a
  model rewrites whole lines (next edits, instruction edits) a line the region already holds
  stays as the buffer has it: only what the model wrote anew is restyled.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import msgspec

__all__ = ["IndentStyle", "buffer_style", "columns", "fill", "restyle", "restyle_line", "restyle_lines"]

# the lines around the cursor that say how the buffer is indented: the nearest ones (the model
# copies its style from what it saw near the cursor)
NEAR_BEFORE = 32
NEAR_AFTER = 16


class IndentStyle(msgspec.Struct, frozen=True):
    """How a buffer's indentation is written."""

    spaces: bool  # in spaces (else tabs, then spaces up to the column)
    tabstop: int  # the columns between the buffer's tab stops
    tab: int  # the columns a tab the model wrote stands for


def _lead(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def buffer_style(lines: Sequence[str], *, expandtab: bool | None, shiftwidth: int, tabstop: int
                 ) -> IndentStyle | None:
    """The style for a buffer with these options (`expandtab` None: not known) whose lines
    around the cursor are `lines` (the cursor line among them); None: leave the model's text
    as it is. (Run on every keystroke: a look at each line's first characters.)"""
    ts = tabstop if tabstop > 0 else 8
    level = shiftwidth if shiftwidth > 0 else ts
    firsts = [line[:1] for line in lines]
    tabbed, spaced = firsts.count("\t"), firsts.count(" ")
    if expandtab is None:
        if tabbed > spaced:
            return IndentStyle(False, ts, ts)
        return IndentStyle(True, ts, _step(lines) or level) if spaced else None
    if expandtab:
        return IndentStyle(False, ts, ts) if tabbed > spaced else IndentStyle(True, ts, level)
    wide = " " * ts
    # lines indented with spaces and none with a tab: the file indents with spaces, and a tab
    # written among them (Vim's own >> would) mixes the two (Python: TabError)
    if spaced and not tabbed or spaced > tabbed and [line[:ts] for line in lines].count(wide) > tabbed:
        return IndentStyle(True, ts, _step(lines) or level)
    return IndentStyle(False, ts, ts)


def _step(lines: Sequence[str]) -> int:
    """The step (1 to 8 columns) the space-indented lines indent by most often, the smaller
    of a tie (0: none)."""
    counts = [0] * 9
    prev = 0
    for line in lines:
        first = line[:1]
        if first == " ":
            body = line.lstrip(" ")
            if not body or body[0] == "\t":
                continue
            width = len(line) - len(body)
            if 0 < width - prev <= 8:
                counts[width - prev] += 1
            prev = width
        elif first and first != "\t":
            prev = 0
    best = max(counts)
    return counts.index(best) if best else 0


def columns(ws: str, start: int, tab: int) -> int:
    """The column after whitespace `ws` written from column `start`, a tab reaching the next
    multiple of `tab`."""
    col = start
    for ch in ws:
        col = col + tab - col % tab if ch == "\t" else col + 1
    return col


def fill(start: int, end: int, style: IndentStyle) -> str:
    """The whitespace from column `start` to column `end` in `style`."""
    if end <= start:
        return ""
    if style.spaces:
        return " " * (end - start)
    ts = style.tabstop
    tabs = end // ts - start // ts
    if tabs <= 0:
        return " " * (end - start)
    return "\t" * tabs + " " * (end % ts)


def restyle_line(line: str, style: IndentStyle, start: int = 0) -> str:
    """`line`, written from column `start`, with its leading whitespace in `style`."""
    lead = _lead(line)
    if not lead:
        return line
    ws = fill(start, columns(lead, start, style.tab), style)
    return line if ws == lead else ws + line[len(lead):]


def restyle(text: str, style: IndentStyle, *, first_at: int | None) -> str:
    """`text` with each line's leading whitespace in `style`: the later lines' from column 0,
    the first line's from column `first_at` (None: it follows other text and is left)."""
    # the common case, checked once per streamed chunk: nothing is written otherwise
    if style.spaces:
        if "\t" not in text:
            return text
    elif "\n " not in text and "\t " not in text and not (first_at is not None and text[:1] == " "):
        return text
    lines = text.split("\n")
    if first_at is not None:
        lines[0] = restyle_line(lines[0], style, first_at)
    for i in range(1, len(lines)):
        lines[i] = restyle_line(lines[i], style)
    return "\n".join(lines)


def restyle_lines(lines: Sequence[str], style: IndentStyle | None, keep: Collection[str] = ()) -> list[str]:
    """Whole lines a model wrote in place of a region, each with its leading whitespace in
    `style` (None: as written); a line the region holds as it is (in `keep`) stays."""
    if style is None:
        return list(lines)
    kept = frozenset(keep)
    return [ln if ln in kept else restyle_line(ln, style) for ln in lines]
