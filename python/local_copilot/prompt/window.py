"""The local window around the cursor, fitted to the server's context, kept between keystrokes.

A snapshot becomes a FIM context (the joined lines around the cursor, long ones cut by
long_lines.py), cut to fit the server's context and hashed for the suggestion cache. Doing all of that anew per keystroke
would cost the host more than anything else it does per key; but while the user types on one line only the
cursor line changes, so comparing the lines around it with the last snapshot's (in C) is
enough to reuse their byte counts, their joins and their hash. The result is the same as
cutting each snapshot anew (tests/unit/window_reference.py, tests/unit/test_window.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..snapshot import Snapshot
from .budget import LineCosts, TokenEstimator, cumulative_bytes, cut_lines, utf8_len
from .cache_key import finish_key, key_head, key_tail
from .context import FimContext, indent_width, join_prefix, join_suffix
from .long_lines import cut_around, fit_line
from .long_lines import cut_lines as cut_long_lines
from .scope import scope_start

__all__ = ["Fitted", "WindowFitter", "ANCHOR_MIN"]

ANCHOR_MIN = 8  # lines: the least step an anchored prefix start moves in


class Fitted:
    """A snapshot's context cut to fit, its cache key, and the tokens it takes."""

    __slots__ = ("ctx", "key", "tokens")

    def __init__(self, ctx: FimContext, key: str, tokens: int) -> None:
        self.ctx, self.key, self.tokens = ctx, key, tokens


class WindowFitter:
    """build_context, the cut to the budget and context_key for successive snapshots of one window."""

    def __init__(self, starts: dict[int, int] | None = None) -> None:
        self.headers = True  # a cut window keeps its enclosing headers (scope.py); False: a measurement's switch
        self._clear()
        # buf -> the row an anchored prefix last started at: kept while the budget's cut stays
        # within a step of it. The budget drifts as the measured speed and the bytes-per-token
        # estimate move, and a start moved up by a line makes the server evaluate the whole
        # window again. Fitters of one server share it (the speculative request's prompt
        # then starts where the typed one does, and the server keeps both's common start).
        self._starts: dict[int, int] = {} if starts is None else starts

    def _clear(self) -> None:
        self._where: tuple[int, int, int, int, str] | None = None  # buf, row, lines_before, lines_after, path
        self._above: list[str] = []
        self._below: list[str] = []
        self._prev: tuple[str, ...] = ()
        self._next: tuple[str, ...] = ()
        self._pre_bytes: list[int] = []  # cumulative, nearest the cursor first
        self._suf_bytes: list[int] = []
        self._costs: tuple[LineCosts, LineCosts] | None = None  # of the lines above and below, at one ratio
        self._head: Any = None  # cache key hash state after the lines above
        self._tail = b""
        # joins of the kept lines (under the enclosing headers of a cut window, scope.py) and
        # the headers' bytes, by where they were cut (a few per window: bpt drifts)
        self._prefixes: dict[tuple[int, int, bool], tuple[str, tuple[str, ...], int]] = {}
        self._suffixes: dict[int, tuple[str, tuple[str, ...]]] = {}

    def forget_buffer(self, buf: int) -> None:
        """The buffer is gone: its lines are not kept here."""
        self._starts.pop(buf, None)
        if self._where is not None and self._where[0] == buf:
            self._clear()

    def fit(self, snap: Snapshot, *, lines_before: int, lines_after: int, budget: int | None,
            est: TokenEstimator, prefix_share: float, suffix_lines: int | None = None,
            anchor: bool = False, room: int | None = None, least_bytes: int = 0) -> Fitted:
        """`budget`: tokens the local window may take in the prompt (None: no limit known).

        `suffix_lines`: at most this many lines below the cursor go into the prompt (the
        post-processor still sees all that fit; the room the others leave goes above).
        `anchor`: the prefix starts at a row anchored in steps of about half the prefix, so
        moving down within a step only appends to the prompt; the start is the anchor at or
        above the budget's cut (up to half as much again) when `room` (the most tokens the
        window may take) has space for that, else the one below; the start of the buffer's
        last prompt is kept while it is near the budget's cut and leaves the window at least
        `least_bytes` (moving up keeps the start and shrinks the window), and no anchor leaves
        it less. All this keeps the server's prompt cache as the cursor moves: llama-server
        keeps the common start of the cached prompt and evaluates everything after the first
        inserted token again, so the suffix (after the cursor's split) is evaluated again on
        each move (llama.cpp's server README, `--cache-reuse`): it must be short, and the start must
        not move up while the user edits down a file."""
        idx = snap.row - snap.first
        lines = snap.lines
        above = lines[max(0, idx - lines_before):idx]
        below = lines[idx + 1:idx + 1 + lines_after]
        where = (snap.buf, snap.row, lines_before, lines_after, snap.path)
        if where != self._where or above != self._above or below != self._below:
            self._load(where, above, below)
        line = lines[idx]
        middle, line_suffix = cut_around(line, snap.char_col)
        key = finish_key(self._head, middle, line_suffix, self._tail)
        n_pre, n_suf = len(self._prev), len(self._next)
        keep_from, suffix_keep, core = 0, n_suf, 0
        if budget is None:
            core_bytes = utf8_len(middle) + utf8_len(line_suffix)
        else:
            bpt = est.bytes_per_token
            # the cursor's line takes at most half the budget: a long one is cut shorter still
            middle, line_suffix = fit_line(middle, line_suffix, int(max(0, budget // 2 - 1) * bpt))
            core_bytes = utf8_len(middle) + utf8_len(line_suffix)
            if self._costs is None or self._costs[0].bpt != bpt:
                self._costs = LineCosts(self._pre_bytes, bpt), LineCosts(self._suf_bytes, bpt)
            core = math.ceil(core_bytes / bpt) + 1
            keep_from, suffix_keep = cut_lines(*self._costs, budget - core, first_row=snap.row - n_pre,
                                               prefix_share=prefix_share, suffix_limit=suffix_lines)
        if anchor and budget is not None:
            fits = self._fits(core, suffix_keep, suffix_lines, budget if room is None else max(budget, room))
            # a power of two near half the kept lines: the same step while the budget drifts a little
            step = max(ANCHOR_MIN, 1 << max(1, (n_pre - keep_from) // 2).bit_length() - 1)
            first_row = snap.row - n_pre
            # (cut_lines rounded its cut down to CUT_STEP: the budget's own cut is above keep_from)
            up = keep_from - 1 - (first_row + keep_from - 1) % step
            roomy = room is not None and room >= budget * 1.5
            kept = self._starts.get(snap.buf, -1) - first_row
            # (two steps: the budget's cut was rounded to CUT_STEP rows already; a start above
            # the budget's cut must still fit in `room`: a long line there would not)
            if roomy and 0 <= kept <= n_pre and abs(keep_from - kept) <= 2 * step and fits(kept) \
                    and self._window_bytes(n_pre - kept, core_bytes, suffix_keep, suffix_lines) >= least_bytes:
                keep_from = kept
            elif up >= 0 and roomy and fits(up):
                keep_from = up
            else:
                keep_from = min(n_pre, keep_from + -(first_row + keep_from) % step)
            # the anchors round the budget's cut to whole steps: never below `least_bytes`
            # while there is room
            while keep_from > 0 and self._window_bytes(n_pre - keep_from, core_bytes, suffix_keep,
                                                       suffix_lines) < least_bytes \
                    and fits(max(0, keep_from - step)):
                keep_from = max(0, keep_from - step)
            self._starts[snap.buf] = first_row + keep_from
        prefix, prev, header_bytes = self._prefix(keep_from, snap.ts)
        _, nxt = self._suffix(suffix_keep)
        if suffix_lines is not None and suffix_lines < suffix_keep:
            suffix_keep = suffix_lines
        tail, _ = self._suffix(suffix_keep)
        prompt_bytes = self._window_bytes(n_pre - keep_from, core_bytes, suffix_keep, None) + header_bytes
        ctx = FimContext(
            prefix=prefix,
            middle=middle,
            suffix=line_suffix + tail,
            line_suffix=line_suffix,
            prev_lines=prev,
            next_lines=nxt,
            # (a line whose start the editor left out has no indentation to tell)
            indent=0 if snap.line_from else indent_width(line, snap.ts),
            indent_chars=0 if snap.line_from else len(line) - len(line.lstrip(" \t")),
            path=snap.path,
            filetype=snap.ft,
        )
        return Fitted(ctx, key, math.ceil(prompt_bytes / est.bytes_per_token))

    def _fits(self, core: int, suffix_keep: int, suffix_lines: int | None,
              room: int) -> Callable[[int], bool]:
        """Whether the window starting at prefix index `keep_from` takes at most `room` tokens
        (the cursor line's `core` tokens, the lines below the prompt carries, those above)."""
        assert self._costs is not None
        pre, suf = self._costs
        n_pre = len(pre)
        left = room - core - suf.cost(suffix_keep if suffix_lines is None else min(suffix_lines, suffix_keep))
        return lambda keep_from: pre.cost(n_pre - keep_from) <= left

    def _window_bytes(self, kept_pre: int, core_bytes: int, suffix_keep: int, suffix_lines: int | None) -> int:
        """Bytes of a window of `kept_pre` lines above, the cursor line and the lines below the
        prompt carries, newlines included."""
        kept_suf = suffix_keep if suffix_lines is None else min(suffix_lines, suffix_keep)
        return core_bytes + (self._pre_bytes[kept_pre - 1] + kept_pre if kept_pre else 0) \
            + (self._suf_bytes[kept_suf - 1] + kept_suf if kept_suf else 0)

    def _load(self, where: tuple[int, int, int, int, str], above: list[str], below: list[str]) -> None:
        self._where, self._above, self._below = where, above, below
        self._prev, self._next = tuple(cut_long_lines(above)), tuple(cut_long_lines(below))
        self._pre_bytes = cumulative_bytes(reversed(self._prev))
        self._suf_bytes = cumulative_bytes(self._next)
        self._costs = None
        self._head = key_head(self._prev, where[4])
        self._tail = key_tail(self._next)
        self._prefixes.clear()
        self._suffixes.clear()

    def _prefix(self, keep_from: int, tabstop: int) -> tuple[str, tuple[str, ...], int]:
        """The prompt's lines above the cursor line from `keep_from` on, under the headers of
        the scopes they lie in when lines above were cut (the model then still sees the
        function and class it completes in; scope.py); the kept lines alone; the bytes the
        headers add."""
        found = self._prefixes.get((keep_from, tabstop, self.headers))
        if found is None:
            prev = self._prev[keep_from:]
            headers, start = scope_start(self._prev, keep_from, tabstop) if keep_from and self.headers \
                else ((), keep_from)
            # (the lines between a near header and the cut go into the prompt, not into `prev`:
            # the post-processor's lines above stay the window the budget chose)
            head = join_prefix(headers) + join_prefix(self._prev[start:keep_from])
            found = self._prefixes[keep_from, tabstop, self.headers] = (head + join_prefix(prev), prev, utf8_len(head))
        return found

    def _suffix(self, keep: int) -> tuple[str, tuple[str, ...]]:
        found = self._suffixes.get(keep)
        if found is None:
            nxt = self._next[:keep]
            found = self._suffixes[keep] = (join_suffix(nxt), nxt)
        return found
