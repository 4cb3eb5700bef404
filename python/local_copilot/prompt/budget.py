"""Fit the FIM context into the server's context window, measured in tokens.

Tokens are estimated from UTF-8 bytes with a bytes-per-token ratio that each backend
calibrates from the prompt token counts its server reports (llama.cpp `tokens_evaluated`,
OpenAI `usage.prompt_tokens`, Ollama `prompt_eval_count`); it starts pessimistic so the
first request never overflows. Cuts are whole lines, taken far from the cursor first, and
in steps anchored to absolute rows so the prompt's beginning stays put while the user types
(the servers' prompt caches keep hitting).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable
from itertools import accumulate, count
from operator import add

__all__ = ["TokenEstimator", "LineCosts", "cut_lines", "cumulative_bytes", "utf8_len", "CUT_STEP", "PROMPT_OVERHEAD",
           "MIN_PROMPT_BUDGET"]

CUT_STEP = 8  # lines; the prefix's first line moves only in steps of this many rows
# room the template and server-added text take in a request (FIM tokens, repo/file markers)
PROMPT_OVERHEAD = 48
# the fewest prompt tokens a request is sent with: a server's context with less room left
# after n_predict is a configuration to fix, not a prompt to cut further
MIN_PROMPT_BUDGET = 64


class TokenEstimator:
    """Bytes per token, learned from what the server says it evaluated.

    `bytes_per_token` moves in steps of 1/STEPS, rounded down (the safe side): the server's
    count moves it a little on every answer, and each move made the window's cut be found
    anew on the next keystroke (window.py keeps the cut's costs per ratio)."""

    STEPS = 128

    # floor 1.0: byte-level vocabularies without many merges (and the tiny test model) give
    # ~1.4 bytes per token on code; at a floor of 1.5 such prompts could never be made to fit
    def __init__(self, bytes_per_token: float = 2.5, floor: float = 1.0, ceiling: float = 5.0) -> None:
        self._floor, self._ceiling = floor, ceiling
        self._set(bytes_per_token)

    def _set(self, value: float) -> None:
        self._exact = value  # blended unrounded, so the steps do not drift down
        self.bytes_per_token = max(self._floor, math.floor(value * self.STEPS) / self.STEPS)

    def tokens(self, text: str) -> int:
        return math.ceil(utf8_len(text) / self.bytes_per_token)

    def observe(self, prompt_bytes: int, prompt_tokens: int) -> None:
        if prompt_tokens <= 0 or prompt_bytes <= 0:
            return
        seen = prompt_bytes / prompt_tokens
        # lean to the smaller (safer) ratio: overestimating tokens only costs context
        blended = 0.7 * self._exact + 0.3 * seen
        self._set(max(self._floor, min(self._ceiling, min(blended, seen * 1.1))))

    def overflowed(self, prompt_bytes: int, prompt_tokens: int | None) -> None:
        """The server refused a prompt as too long; with its own count, take that ratio (less a
        margin) at once, else count more pessimistically."""
        if prompt_tokens and prompt_bytes > 0:
            self._set(max(self._floor, min(self._exact, prompt_bytes / prompt_tokens * 0.95)))
        else:
            self._set(max(self._floor, self._exact * 0.7))


class LineCosts:
    """What the first n of some lines cost in tokens at `bpt` bytes per token, for any n.

    `cum` are the lines' cumulative UTF-8 bytes (nearest the cursor first); a line costs its
    bytes and its newline at `bpt`, plus one token (a line's tokens end at its newline). This
    runs per keystroke, where a Python loop over a window's lines, or a bisection calling a
    cost function per probe, costs a call per line or probe. Scaled by `bpt` the
    costs are sums in C, and how many lines fit is one bisection in C."""

    __slots__ = ("bpt", "_scaled")

    def __init__(self, cum: list[int], bpt: float) -> None:
        self.bpt = bpt
        # cost(n) * bpt = cum[n-1] + n * (1 + bpt)
        self._scaled = list(map(add, cum, count(1.0 + bpt, 1.0 + bpt)))

    def __len__(self) -> int:
        return len(self._scaled)

    def total(self) -> float:
        """Tokens of all the lines."""
        return self._scaled[-1] / self.bpt if self._scaled else 0.0

    def within(self, tokens: float) -> int:
        """How many of the lines (from the first) fit in `tokens`."""
        return bisect_right(self._scaled, tokens * self.bpt)

    def cost(self, n: int) -> float:
        """Tokens of the first `n` lines."""
        return self._scaled[n - 1] / self.bpt if n > 0 else 0.0


def cut_lines(pre: LineCosts, suf: LineCosts, room: float, *, first_row: int,
              prefix_share: float, suffix_limit: int | None = None) -> tuple[int, int]:
    """Where the window is cut (prompt/window.py): (index of the first prefix line kept, suffix lines kept).

    `pre` are the costs of the lines above, nearest the cursor first, `suf` those of the
    lines below; `room` is the budget less the cursor line. `suffix_limit`: the prompt carries
    at most this many lines below, whatever their share; the room they leave goes above (the
    suffix lines kept are still those of the share: the post-processor reads them)."""
    left = max(0, room)
    n_pre, n_suf = len(pre), len(suf)
    total_pre, total_suf = pre.total(), suf.total()
    if total_pre + total_suf <= left:
        return 0, n_suf
    # share the room; a side that needs less than its share leaves the rest to the other
    want_pre: float = int(left * prefix_share)
    if total_suf < left - want_pre:
        want_pre = left - math.ceil(total_suf)
    want_suf = left - min(want_pre, total_pre)
    suffix_keep = suf.within(want_suf)
    if suffix_limit is not None and suffix_limit < suffix_keep:
        want_pre = left - math.ceil(suf.cost(suffix_limit))

    # prefix: keep the lines nearest the cursor, cut where (first_row + index) % CUT_STEP == 0
    keep_from = n_pre - pre.within(want_pre)
    # round the cut down to an anchored row: stable while typing below
    keep_from = min(n_pre, keep_from + -(first_row + keep_from) % CUT_STEP)
    return keep_from, suffix_keep


def utf8_len(text: str) -> int:
    """UTF-8 bytes of `text` (lone surrogates from invalid UTF-8 count as the byte each was);
    counted without encoding a copy when it is ASCII, as prompts mostly are."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogateescape"))


def cumulative_bytes(lines: Iterable[str]) -> list[int]:
    """Running totals of the lines' UTF-8 bytes (their newlines not counted)."""
    lines = list(lines)
    # all ASCII, as code mostly is: one check, then len() in C instead of a call per line
    return list(accumulate(map(len if "".join(lines).isascii() else utf8_len, lines)))
