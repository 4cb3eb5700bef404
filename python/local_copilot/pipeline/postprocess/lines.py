"""Lines as the rules compare them: ASCII whitespace, blank lines, indentation widths with
tabs expanded."""

from __future__ import annotations

from collections.abc import Sequence

# ASCII whitespace only: U+3000 and friends are content in CJK text, not padding.
_WS = " \t\r\n\f\v"


def _rstrip(s: str) -> str:
    return s.rstrip(_WS)


def _is_blank(line: str) -> bool:
    return not line.strip(_WS)


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def indent_width(line: str, tabstop: int = 8) -> int:
    """Display width of the leading spaces/tabs (tabs expanded to ``tabstop``)."""
    lead = line[: len(line) - len(line.lstrip(" \t"))]
    return len(lead.expandtabs(tabstop)) if "\t" in lead else len(lead)


def _norm(line: str, tabstop: int) -> str:
    # Lines are compared with tabs expanded and trailing whitespace ignored.
    return _rstrip(line.expandtabs(tabstop) if "\t" in line else line)


def _first_nonblank(lines: Sequence[str]) -> str | None:
    for line in lines:
        if not _is_blank(line):
            return line
    return None
