"""WindowFitter gives what build_context + fit_context + context_key give, snapshot after
snapshot, whether it reuses the last window (typing on one line) or not (edits above or below,
another row, buffer or file name, a changed estimate)."""

from __future__ import annotations

import random

import pytest

from local_copilot.pipeline.cache import context_key
from local_copilot.prompt.budget import TokenEstimator
from local_copilot.prompt.context import build_context
from local_copilot.prompt.window import WindowFitter
from local_copilot.snapshot import Snapshot, char_to_byte_col

from .window_reference import fit_context


def _lines(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    words = ["def", "x", "return", "self.value", "é", "日本", "\t", "    ", "# note", "(", ")", ":"]
    return ["".join(rnd.choice(words) for _ in range(rnd.randrange(0, 12))) for _ in range(n)]


def _reference(snap: Snapshot, before: int, after: int, budget: int | None, est: TokenEstimator):
    ctx = build_context(snap, lines_before=before, lines_after=after)
    key = context_key(ctx)
    if budget is not None:
        ctx = fit_context(ctx, budget, est, first_row=snap.row - len(ctx.prev_lines), prefix_share=0.75,
                          tabstop=snap.ts)
    return ctx, key, est.tokens(ctx.prefix + ctx.middle + ctx.suffix)


@pytest.mark.parametrize("budget", [None, 100_000, 900, 300])
def test_the_fitted_window_matches_building_and_fitting_it_anew(budget: int | None) -> None:
    est = TokenEstimator()
    fitter = WindowFitter()
    lines = _lines(600, seed=1)
    row, buf, path = 300, 1, "/p/a.py"
    typed = ""
    rnd = random.Random(2)
    for step in range(120):
        action = rnd.random()
        if action < 0.6:  # type on the cursor line
            typed += rnd.choice("ab(é日 ")
        elif action < 0.7:
            lines[row - rnd.randrange(1, 50)] += "z"  # an edit above
        elif action < 0.75:
            lines[row + rnd.randrange(1, 30)] = "new"  # an edit below
        elif action < 0.85:
            row += rnd.choice([-1, 1])  # another row
            typed = ""
        elif action < 0.9:
            buf = 3 - buf
        elif action < 0.93:
            path = "/p/b.py" if path == "/p/a.py" else "/p/a.py"  # the buffer renamed (:saveas)
        else:
            est.observe(prompt_bytes=rnd.randrange(1000, 4000), prompt_tokens=1000)  # the estimate drifts
        first = row - 200
        window = list(lines[first:row + 61])
        window[row - first] = lines[row] + typed + "tail()"
        col = char_to_byte_col(window[row - first], len(lines[row] + typed))
        snap = Snapshot(buf=buf, tick=step, row=row, col=col, first=first, lines=window, ts=4, path=path)
        got = fitter.fit(snap, lines_before=200, lines_after=60, budget=budget, est=est, prefix_share=0.75)
        ctx, key, tokens = _reference(snap, 200, 60, budget, est)
        assert got.ctx == ctx and got.key == key and got.tokens == tokens, step


def test_a_forgotten_buffers_lines_are_not_kept() -> None:
    fitter = WindowFitter()
    snap = Snapshot(buf=7, tick=1, row=1, col=0, first=0, lines=["a", "b", "c"])
    fitter.fit(snap, lines_before=10, lines_after=10, budget=None, est=TokenEstimator(), prefix_share=0.75)
    fitter.forget_buffer(8)
    assert fitter._above == ["a"]
    fitter.forget_buffer(7)
    assert fitter._above == [] and fitter._below == []
