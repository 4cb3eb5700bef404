"""The enclosing scope's headers: when the window around the cursor is cut, the lines that open
the class, function and blocks its first lines lie in are kept above it.

A window cut in the middle of a function shows the model a body without its name, parameters
or class, and it guesses them. The headers are found by indentation, which every language the
plugin sees in practice is written with: going up from the window's first line, each line
indented less than everything below it opens a scope that line lies in. They depend on where
the window starts only, so they stay while the start does (the server's prompt cache holds). A header written over several
lines (a long signature whose last line is `) -> int:` or `) {`) is taken whole; a line that
only closes a sibling block (`}`, `end`, `});`) opens nothing and is passed over, as are
comments and blank lines.

Pure and cheap: it reads the lines the window fitter already holds, once per cut.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["enclosing_headers", "scope_start", "MAX_HEADERS", "MAX_HEADER_LINES", "NEAR_LINES"]

MAX_HEADERS = 6  # scopes kept, innermost first: deeper nesting than this says little more
MAX_HEADER_LINES = 12  # lines in all; a signature written over more is cut from its start
MAX_STATEMENT_LINES = 8  # lines one header may span
SCAN_LINES = 400  # lines above the window looked at: the snapshot's own bound is near this
NEAR_LINES = 8  # a window starting this close below its innermost header starts at the header
NEAR_SHARE = 4  # ... and at most a quarter of the window's own lines (the budget chose those)

_COMMENT_STARTS = ("#", "//", "--", "/*", "*", ";", "%", '"""', "'''")
_CLOSERS = ")]}"
_OPENERS = "([{"
_BLOCK_ENDS = ("end", "fi", "done", "esac", "endif", "endfunction", "endfor", "endwhile")


def _indent(line: str, tabstop: int) -> int:
    lead = line[:len(line) - len(line.lstrip(" \t"))]
    return len(lead.expandtabs(tabstop or 8)) if "\t" in lead else len(lead)


def _balance(text: str) -> int:
    """Openers minus closers (strings and comments are not told apart: a header's brackets are
    its own in all but rare lines, and a wrong count only shortens what is kept)."""
    return sum(text.count(c) for c in _OPENERS) - sum(text.count(c) for c in _CLOSERS)


def _closes_only(stripped: str) -> bool:
    """A line that ends a sibling block and opens nothing: `}`, `});`, `end`, `end)`."""
    if stripped[0] in _CLOSERS:
        return _balance(stripped) <= 0 and not stripped.rstrip(";, ").endswith(("{", ":", "(", "["))
    word = stripped.split(None, 1)[0].rstrip(");,")
    return word in _BLOCK_ENDS


def _statement_start(lines: Sequence[str], last: int, lowest: int) -> int:
    """The first line of the statement whose last line is `last`: up while its brackets close
    more than they open (at most MAX_STATEMENT_LINES lines, never above `lowest`)."""
    first = last
    if lines[last].strip() in _OPENERS and last > lowest:
        # a brace on a line of its own (Allman style) opens the statement above it
        first -= 1
        while first > lowest and not lines[first].strip():
            first -= 1
    depth = sum(_balance(line) for line in lines[first:last + 1])
    while depth < 0 and first > lowest and last - first < MAX_STATEMENT_LINES - 1:
        first -= 1
        depth += _balance(lines[first])
    return first if depth >= 0 else last  # (unbalanced: a header's text is kept from its last line)


def scope_start(lines: Sequence[str], start: int, tabstop: int = 8) -> tuple[tuple[str, ...], int]:
    """Where the prompt's window starts and the headers above it: `start`, under the headers
    of enclosing_headers(); or, when the innermost header ends close above `start` (NEAR_LINES,
    and a quarter of the window's lines), that header's first line, under the outer ones. The window then reads on from its
    header without a gap, and the text it starts with is a run of the text a window starting
    further up held: a server that keeps the cached prompt's runs (llama-server's
    `--cache-reuse`) evaluates only the outer headers again when the start moves into the next
    function."""
    found = _headers(lines, start, tabstop)
    near = min(NEAR_LINES, max(1, (len(lines) - start) // NEAR_SHARE))
    if found and start - found[0][1] - 1 <= near:
        start = found[0][0]
        found = found[1:]
    out: list[str] = []
    for first, last in reversed(found):
        out.extend(lines[first:last + 1])
    return tuple(out), start


def enclosing_headers(lines: Sequence[str], start: int, tabstop: int = 8) -> tuple[str, ...]:
    """The header lines from `lines[:start]` that open the scopes `lines[start:]` (the
    window's lines above the cursor) lie in, outermost first; empty when nothing above is
    indented less than the window's first line."""
    out: list[str] = []
    for first, last in reversed(_headers(lines, start, tabstop)):
        out.extend(lines[first:last + 1])
    return tuple(out)


def _headers(lines: Sequence[str], start: int, tabstop: int) -> list[tuple[int, int]]:
    """(first, last) line of each header, innermost first."""
    # a header is indented less than the window's first line: the scopes that line lies in.
    # (Not less than every window line: the lines the cursor passes on its way down would then
    # take headers away and move the prompt's start, which the server has cached.)
    need = next((_indent(line, tabstop) for line in lines[start:] if line.strip()), 0)
    found: list[tuple[int, int]] = []
    kept = 0
    lowest = max(0, start - SCAN_LINES)
    i = start - 1
    while i >= lowest and need > 0 and len(found) < MAX_HEADERS:
        line = lines[i]
        stripped = line.strip()
        if not stripped or stripped.startswith(_COMMENT_STARTS):
            i -= 1
            continue
        width = _indent(line, tabstop)
        if width >= need or _closes_only(stripped):
            i -= 1
            continue
        first = _statement_start(lines, i, lowest)
        if kept + (i - first + 1) > MAX_HEADER_LINES:
            break
        found.append((first, i))
        kept += i - first + 1
        need = _indent(lines[first], tabstop) if first != i else width
        i = first - 1
    return found
