"""Stages 6 and 8: loops (a line 3 times in a row, a block of lines twice) and suggestions
that only copy the line above; while streaming, the lines that may still turn out to be
such a repeat."""

from __future__ import annotations

from collections.abc import Sequence

from .context import PostContext
from .lines import _WS, _is_blank, _norm, _rstrip

_MAX_PERIOD = 8  # longest repeated block looked for (lines)


def _nonblank_idx(norm: Sequence[str]) -> list[int]:
    return [i for i, s in enumerate(norm) if s.strip(_WS)]


def repeat_cut(lines: Sequence[str], start: int = 0) -> int | None:
    """Index where a loop's second occurrence starts (keep everything before).

    A loop is the same non-blank line 3 times in a row (blank lines between are
    ignored; twice happens in real code) or a block of 2-8 lines, with at least
    two non-blank lines, twice back to back.  Only loops ending at or after line
    `start` are looked for (the caller knows there is none before).
    """
    if len(lines) < 3:  # neither a line 3 times nor a block twice fits
        return None
    norm = [_rstrip(s) for s in lines]
    n = len(norm)
    best: int | None = None
    nb = _nonblank_idx(norm)
    for a in range(len(nb) - 2):
        if nb[a + 2] >= start and norm[nb[a]] == norm[nb[a + 1]] == norm[nb[a + 2]]:
            best = nb[a + 1]
            break
    for c in range(max(2, start - _MAX_PERIOD + 1), n if best is None else best):
        for p in range(2, min(_MAX_PERIOD, c) + 1):
            if c + p > n:
                break
            if norm[c] != norm[c - p]:  # cheap reject before slicing
                continue
            blk = norm[c - p : c]
            if blk == norm[c : c + p] and sum(1 for s in blk if s) >= 2:
                return c
    return best


def _cut_off_loop(lines: Sequence[str]) -> int | None:
    """Index of a loop's second line when the answer ends in its third, cut off part-way (the
    server's token limit): a line twice, then a start of it.  ``None`` otherwise."""
    norm = [_rstrip(s) for s in lines]
    nb = _nonblank_idx(norm)
    if len(nb) < 3:
        return None
    a, b, c = nb[-3:]
    if norm[a] == norm[b] and norm[b].startswith(norm[c]) and norm[c] != norm[b]:
        return b
    return None


def repeat_holdback(lines: Sequence[str], partial: str | None = None) -> int:
    """While streaming: index from which complete lines may still turn out to be a
    loop's second occurrence (so they are not shown yet).

    `partial` is the line being written after them: once it cannot be the next
    line of a pattern, that pattern is off.
    """
    norm = [_rstrip(s) for s in lines]
    part = None if partial is None else _rstrip(partial)

    def may_continue(expected: str, skip_blank: bool) -> bool:
        if part is None or (skip_blank and not part):
            return True
        return expected.startswith(part)

    n = len(norm)
    h = n
    nb = _nonblank_idx(norm)
    if len(nb) >= 2 and norm[nb[-1]] == norm[nb[-2]] and may_continue(norm[nb[-1]], True):
        h = nb[-1]
    for p in range(2, _MAX_PERIOD + 1):
        for m in range(p - 1, 0, -1):
            c = n - m
            if c - p < 0 or c >= h or norm[c] != norm[c - p]:
                continue
            blk = norm[c - p : c]
            if norm[c:] == blk[:m] and sum(1 for s in blk if s) >= 2 and may_continue(blk[m], False):
                h = c
                break
    return h


def _above_prefix(partial: str, ctx: PostContext) -> bool:
    """Whether a partial line 0 on a blank cursor line may still become the line above."""
    above = _line_above(ctx)
    return above is not None and _norm(above, ctx.tabstop).startswith(_norm(partial, ctx.tabstop))


def _recent_prefix(partial: str, full: Sequence[str]) -> bool:
    """Whether the partial line may still become the start of a loop: a repeat of
    the last non-blank line or of a line up to a block period back."""
    p = _rstrip(partial)
    recent = [s for s in full[-_MAX_PERIOD:] if not _is_blank(s)]
    last = next((s for s in reversed(full) if not _is_blank(s)), None)
    if last is not None:
        recent.append(last)
    return any(_rstrip(s).startswith(p) for s in recent)


def _line_above(ctx: PostContext) -> str | None:
    return next((s for s in reversed(ctx.prev_lines) if not _is_blank(s)), None)


def only_repeats(kept: Sequence[str], fulls: Sequence[str], ctx: PostContext) -> bool:
    """Whether the suggestion adds nothing but copies of the line above each of its lines.

    `kept` are the suggestion's lines, `fulls` the same as whole lines (line 0 with the
    prefix).  A suggestion that changes the cursor line after typed text adds something;
    on a blank cursor line, line 0 is compared with the nearest non-blank line above.
    Lines are compared with their indentation (tabs expanded, trailing blanks ignored).
    Such a suggestion is shown as nothing: accepting it would only duplicate a line.
    """
    ts = ctx.tabstop
    if not _is_blank(ctx.line_prefix):
        if not kept or not _is_blank(kept[0]):
            return False
        above: str | None = ctx.line_prefix
    else:
        above = _line_above(ctx)
    added = False
    for line in fulls:
        if _is_blank(line):
            continue
        if above is None or _norm(line, ts) != _norm(above, ts):
            return False
        added = True
    return added
