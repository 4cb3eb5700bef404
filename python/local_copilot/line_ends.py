"""The one rule for where a document's lines end: `\\r\\n`, `\\r` and `\\n`, the line ends of the
Language Server Protocol (and of Python's universal newlines, which `local-copilot complete`
reading stdin gets).

`str.splitlines` also ends a line at a form feed (`^L`, PEP 8's page break), `\\x1c`-`\\x1e`,
NEL (`\\x85`) and the Unicode line and paragraph separators (U+2028, U+2029): inside a line of
code these are characters of that line, and a client counts positions past them on the same
line. Text of a document is split here, so that every path (the language server's copy of a
document, the positions in it, a file the CLI completes) counts the same lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["LINE_END", "line_spans", "split_lines"]

LINE_END = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """`text`'s lines without their ends; a final line end starts one more, empty line (a
    cursor may sit there), so "" is one empty line."""
    return LINE_END.split(text) if "\r" in text else text.split("\n")


def line_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of `text`, its line end excluded, first to last (as many as
    split_lines gives)."""
    start = 0
    for m in LINE_END.finditer(text):
        yield start, m.start()
        start = m.end()
    yield start, len(text)
