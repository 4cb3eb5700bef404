"""The plain way to cut a window to the prompt budget, one snapshot at a time: what
WindowFitter (prompt/window.py), which reuses the last snapshot's work, must give."""

from __future__ import annotations

from local_copilot.prompt.budget import LineCosts, TokenEstimator, cumulative_bytes, cut_lines
from local_copilot.prompt.context import FimContext, join_prefix, join_suffix
from local_copilot.prompt.long_lines import fit_line
from local_copilot.prompt.scope import scope_start

__all__ = ["fit_context"]


def fit_context(ctx: FimContext, budget: int, est: TokenEstimator, *, first_row: int,
                prefix_share: float = 0.75, tabstop: int = 8) -> FimContext:
    """Drop whole lines (prefix from the top, suffix from the bottom) until it fits.

    `first_row` is the buffer row of ctx.prev_lines[0]; `budget` is what the prompt may use
    (context window minus n_predict minus the template's own tokens). The cursor line is
    always kept (that is where the completion goes), within half the budget: a long one is cut
    shorter around the cursor (long_lines.fit_line). When lines above were dropped, the headers
    of the scopes the kept ones lie in go above them (scope.py), beyond the budget (and the
    lines up to a header just above the cut).

    A line costs its bytes and its newline at the learned ratio, plus one token (a line's
    tokens end at its newline): see LineCosts.
    """
    bpt = est.bytes_per_token
    middle, line_suffix = fit_line(ctx.middle, ctx.line_suffix, int(max(0, budget // 2 - 1) * bpt))
    core = est.tokens(middle + line_suffix) + 1
    pre = LineCosts(cumulative_bytes(reversed(ctx.prev_lines)), bpt)  # nearest the cursor first
    suf = LineCosts(cumulative_bytes(ctx.next_lines), bpt)
    keep_from, suffix_keep = cut_lines(pre, suf, budget - core, first_row=first_row, prefix_share=prefix_share)
    if keep_from == 0 and suffix_keep == len(suf) and (middle, line_suffix) == (ctx.middle, ctx.line_suffix):
        return ctx
    prev = ctx.prev_lines[keep_from:]
    nxt = ctx.next_lines[:suffix_keep]
    headers, start = scope_start(ctx.prev_lines, keep_from, tabstop) if keep_from else ((), 0)
    return FimContext(
        prefix=join_prefix(headers) + join_prefix(ctx.prev_lines[start:]),
        middle=middle,
        suffix=line_suffix + join_suffix(nxt),
        line_suffix=line_suffix,
        prev_lines=prev,
        next_lines=nxt,
        indent=ctx.indent,
        indent_chars=ctx.indent_chars,
        path=ctx.path,
        filetype=ctx.filetype,
    )
