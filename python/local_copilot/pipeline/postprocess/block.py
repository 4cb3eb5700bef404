"""Stage 5: the suggestion stops where a later line leaves the block the cursor is in."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .context import PostContext
from .lines import _is_blank, indent_width
from .scanner import _OPEN_FOR, _QUOTES, _opens_block
from .structure import _walk_back

# C preprocessor conditionals sit at column 0 inside blocks: their indentation ends nothing
# (a #define or #include there more often starts what follows the block)
_PREPROC_RE = re.compile(r"#\s*(?:if|ifdef|ifndef|elif|else|endif)\b")


def block_indent(ctx: PostContext, cursor_line: str) -> int:
    """Smallest indentation a later line may have and still be in the cursor's block.

    `cursor_line` is the whole cursor line (prefix + completion's first line).  A
    line ending with ``:`` ``{`` ``(`` ``[`` opens a block: its statement's indent
    + 1, where the user typed the statement (a header the suggestion writes itself,
    inside a block, is nested in the cursor's block: its statement's indent).
    Otherwise the statement's indent (a line that closes brackets opened above
    belongs to the statement that opened them).  A blank cursor line takes
    the block from the line above.  Every uncertainty lowers the result: a lower
    bound never cuts real code.
    """
    ts = ctx.tabstop
    if _is_blank(cursor_line):
        prev = ctx.prev_lines
        j = len(prev) - 1
        while j >= 0 and _is_blank(prev[j]):
            j -= 1
        if j < 0:
            return 0
        stmt = _walk_back(prev[:j], prev[j], ts)[0]
        base = 0 if stmt is None else stmt
        if _opens_block(prev[j]):
            return base + 1
        return min(indent_width(cursor_line, ts), base)
    stmt = _walk_back(ctx.prev_lines, cursor_line, ts)[0]
    base = 0 if stmt is None else stmt
    if not _opens_block(cursor_line):
        return base
    if base > 0 and _is_blank(ctx.line_prefix):
        # the suggestion's own first line opens the block (nothing but indentation typed):
        # that block is nested in the cursor's, and the suggestion may go on after it at the
        # cursor's level (an `if` and then the `return` below it). At the top level a
        # suggestion stays one definition: it ends with the block it opened.
        return base
    return base + 1


def leaves_block(line: str, stack: Sequence[str], block: int, tabstop: int,
                 in_comment: Callable[[], bool] = lambda: False) -> bool:
    """A non-blank line indented less than the block: the suggestion has left it.

    `stack` holds the brackets/quotes opened on the cursor line or in the
    completion that are still open where `line` starts.  Exempt: a line that
    closes the innermost of them (``}`` / ``)`` at the parent indent in C/JS or
    black-style Python), a line inside a string (its indent is text), and a
    preprocessor conditional (column 0 inside blocks) unless it sits inside a
    ``/* */`` comment (`in_comment`, asked only then), where it is no directive.
    """
    if _is_blank(line) or indent_width(line, tabstop) >= block:
        return False
    if _PREPROC_RE.match(line) and not in_comment():
        return False
    if stack:
        top = stack[-1]
        if top in _QUOTES:
            return False
        body = line.lstrip(" \t")
        if body[:1] in _OPEN_FOR and _OPEN_FOR[body[0]] == top:
            return False
    return True


_DOCSTRING_RE = re.compile(r"[rRuUbBfF]{0,2}(?:\"\"\"|''')")


def _leaves_string(line: str, stack: Sequence[str], block: int, fulls: Sequence[str], prefix_len: int,
                   tabstop: int) -> bool:
    """A line inside a triple-quoted string, left of both the block and the string's own
    line, where the string is a docstring or was opened by the completion: the next
    ``def`` or statement, not the string's text.

    A string the user opened before the cursor may hold text at any indentation: the user
    is writing that text.  One the completion opened ends the suggestion there instead;
    the next request, with the opener before the cursor, continues its text uncut.
    """
    if not stack or stack[-1] not in _QUOTES or _is_blank(line):
        return False
    ind = indent_width(line, tabstop)
    if ind >= block:
        return False
    for j in range(len(fulls) - 1, -1, -1):
        full = fulls[j]
        if '"""' in full or "'''" in full:
            if ind >= indent_width(full, tabstop):
                return False
            if _DOCSTRING_RE.match(full.lstrip(" \t")):
                return True
            opened = full[prefix_len:] if j == 0 else full
            return '"""' in opened or "'''" in opened
    return False
