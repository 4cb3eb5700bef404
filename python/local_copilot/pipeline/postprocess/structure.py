"""Where the cursor sits in the code, read from the lines around it: the statement it is
in and the bracket enclosing it, a string or comment it is inside, whether its statement
goes on below."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from .context import PostContext
from .lines import _first_nonblank, _is_blank, _rstrip, indent_width
from .scanner import _OPEN_FOR, _QUOTES, _end_state, _imbalance, _scan_line, _summary

_WALK_LIMIT = 64  # how far back we look for the start of the cursor's statement


def _entry_stack(ctx: PostContext) -> tuple[str, ...]:
    """The quote the cursor line starts inside: the line closes a triple-quoted string
    that the lines above opened (a docstring's last line), else nothing.

    Both must agree: an odd count of that triple quote above (the window may start inside
    a string, so the count alone is no proof) and the line reading better balanced from
    inside the string than from outside it.
    """
    line = ctx.line_prefix + ctx.line_suffix
    for tq in ('"""', "'''"):
        if tq in line and sum(s.count(tq) for s in ctx.prev_lines) % 2:
            inside = (tq[0],)
            if _imbalance(_end_state(line, inside)) < _imbalance(_end_state(line)):
                return inside
    return ()


def _in_block_comment(ctx: PostContext, fulls: Sequence[str]) -> bool:
    """Whether the kept text ends inside a ``/* */`` comment (the nearest opener above
    is not closed yet)."""
    for line in itertools.chain(reversed(fulls), reversed(ctx.prev_lines[-_WALK_LIMIT:])):
        o, c = line.rfind("/*"), line.rfind("*/")
        if o >= 0 or c >= 0:
            return o > c
    return False


def _continues_below(ctx: PostContext) -> bool:
    """Whether the cursor's statement goes on below, so its line may end with brackets
    open: the next non-blank line closes brackets opened above it, or is indented deeper
    while the cursor line opens no block (``:`` or ``{`` at its end)."""
    nxt = _first_nonblank(ctx.next_lines)
    if nxt is None:
        return False
    if _summary(nxt)[0]:
        return True
    line = ctx.line_prefix + ctx.line_suffix
    ts = ctx.tabstop
    return indent_width(nxt, ts) > indent_width(line, ts) and not _rstrip(line).endswith((":", "{"))


class _Opener(NamedTuple):
    char: str
    indent: int  # indentation of the line holding the bracket
    unclosed_on_line: int  # brackets of that line still open at the cursor


# `line` changes on every key, so few calls repeat (a soak's hit rate is 0.04 at any size);
# each entry holds a window of lines above the cursor, kept small.
@lru_cache(maxsize=16)
def _walk_back(
    prev: tuple[str, ...], line: str, tabstop: int
) -> tuple[int | None, _Opener | None]:
    """Statement indent of `line` and the innermost bracket enclosing it.

    Walks up the previous lines matching `line`'s unmatched closers to the lines
    that opened them and following backslash continuations (the statement start),
    then on to the first less-indented line (the block header) looking for a
    bracket still open at `line`.  Returns ``None`` for the indent when the
    statement start is out of sight or the brackets do not match up: callers then
    assume nothing.
    """
    return _walk_back_from(prev, _summary(line)[0], indent_width(line, tabstop), tabstop)


# While the user types, `line` changes on every key and `prev` (the same tuple) does not; the
# walk depends on `line` only through its unmatched closers and its indent. Memoized, a key
# costs a lookup instead of the walk's ~90 lines of Python. Each entry holds a window of
# lines: 16 hit as often as 64 (a soak's hit rate 0.86 either way).
@lru_cache(maxsize=16)
def _walk_back_from(
    prev: tuple[str, ...], closers: tuple[str, ...], lo: int, tabstop: int
) -> tuple[int | None, _Opener | None]:
    pending = list(closers)
    own = bool(pending)  # still resolving `line`'s own statement
    top = len(prev)  # earliest line known to belong to the statement
    enc: _Opener | None = None
    for j in range(len(prev) - 1, max(-1, len(prev) - 1 - _WALK_LIMIT), -1):
        pl = prev[j]
        if _is_blank(pl):
            continue
        cont = j == top - 1 and _rstrip(pl).endswith("\\")
        closers, openers = _summary(pl)
        ind = indent_width(pl, tabstop)
        was_pending = bool(pending)
        ops = list(openers)
        while ops and pending:
            if _OPEN_FOR[pending.pop(0)] != ops.pop():
                return (None if own else lo), None
        if (own and was_pending) or cont:
            lo, top = min(lo, ind), j
        if ops and enc is None:  # still open at `line`: the innermost enclosing bracket
            enc = _Opener(ops[-1], ind, len(ops))
        pending = list(closers) + pending
        if own and not pending:
            own = False
        if not own and (enc is not None or (not pending and ind < lo)):
            return lo, enc
    return (None if own else lo), enc


def _cursor_opener(ctx: PostContext) -> _Opener | None:
    """The innermost bracket open at the cursor, if we can tell."""
    pre = ctx.line_prefix
    sc = _scan_line(pre)
    if sc.code_end < len(pre) or (sc.stack and sc.stack[-1] in _QUOTES):
        return None
    if sc.stack:
        return _Opener(sc.stack[-1], indent_width(pre, ctx.tabstop), len(sc.stack))
    return _walk_back(ctx.prev_lines, pre, ctx.tabstop)[1]
