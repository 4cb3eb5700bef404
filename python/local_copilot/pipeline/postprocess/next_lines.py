"""Stages 3 and 4 below the cursor: the suggestion stops where it repeats the next existing
line (as it is, or a statement of its own at another indentation), and does not emit a
closer that line starts with."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .context import PostContext
from .lines import _first_nonblank, _is_blank, _norm, indent_width
from .scanner import _OPEN_FOR, _opens_block, _summary
from .structure import _cursor_opener


def existing_line_cut(lines: Sequence[str], ctx: PostContext) -> int | None:
    """Index of the first completion line equal to the next existing non-blank line.

    ``lines[0]`` is the whole cursor line; it only counts when the cursor line was
    blank (a fresh line that duplicates the one below).  Lines are compared with
    tabs expanded and trailing whitespace ignored, but with their indentation: a
    ``}`` or ``return x`` at another depth is a different statement.
    """
    nxt = _first_nonblank(ctx.next_lines)
    if nxt is None:
        return None
    target = _norm(nxt, ctx.tabstop)
    for k, line in enumerate(lines):
        if k == 0 and not _is_blank(ctx.line_prefix):
            continue
        if not _is_blank(line) and _norm(line, ctx.tabstop) == target:
            return k
    return None


_WORDS = re.compile(r"\w+")


def statement_of_its_own(body: str) -> bool:
    """Whether `body`, a line without its indentation, says enough to be the same line
    wherever it is indented: 8 characters or more with two words or more, or 16 characters
    or more of anything (a rule of `=` under a comment mark). A closer, a keyword or a short
    assignment (``}``, ``end``, ``else:``, ``c = 3``) recurs at every depth as a different
    statement; ``self.items.append(item)`` written again one step deeper under the line
    that has it is the model writing the next line again."""
    return len(body) >= 16 or (len(body) >= 8 and len(_WORDS.findall(body)) >= 2)


# what ends a line after which the next one may be deeper: a block header in Lua or the
# shell (`then`, `do`, `else`, `repeat`, `function (...)`), a continued expression
_HEADER_END = re.compile(r"(?:\b(?:then|do|else|repeat|in|and|or)|\bfunction\b.*\)|[\\,=+&|]|\s[-*/%<>])[ \t]*$")


def opens_deeper(lines: Sequence[str]) -> bool:
    """Whether any of `lines` (the cursor line and the suggestion's lines so far) lets a
    later line be indented deeper: it opens a block, leaves a bracket open or continues
    its expression. Without one, a deeper line is no statement of the same code."""
    return any(_opens_block(s) or _summary(s)[1] or _HEADER_END.search(s) for s in lines)


def reindented_repeat(line: str, next_body: str | None, *, partial: bool) -> bool | None:
    """For a later line of the suggestion (`line`, tabs expanded): True when it is the next
    existing line again at another indentation (`next_body`: that line without its
    indentation, when it is a statement of its own), None while a streamed partial line may
    still become it, else False."""
    if next_body is None:
        return False
    body = line.lstrip(" \t")
    if partial:
        return None if body and next_body.startswith(body) else False
    return body == next_body


def closer_cut(closer: str, ctx: PostContext) -> bool:
    """Whether a closer the completion emits for a bracket open at the cursor is
    already there at the start of the next existing line.

    Only when that line is aligned with the bracket's line and the bracket is the
    only one that line leaves open - otherwise the existing closer may belong to
    an outer bracket and the completion's one is needed.
    """
    if closer not in _OPEN_FOR:
        return False
    nxt = _first_nonblank(ctx.next_lines)
    if nxt is None or not nxt.lstrip(" \t").startswith(closer):
        return False
    o1 = _cursor_opener(ctx)
    return (
        o1 is not None
        and o1.char == _OPEN_FOR[closer]
        and o1.unclosed_on_line == 1
        and o1.indent == indent_width(nxt, ctx.tabstop)
    )
