"""Long lines are cut before they enter a prompt (prompt/long_lines.py): in the window around
the cursor, whatever the budget and however the window is anchored, in cross-file chunks and
yanks, in next-edit history and in the code around an instruction edit's selection."""

from __future__ import annotations

import time

import msgspec
import pytest

from local_copilot.config import Config
from local_copilot.instruct.prompt import EditSpec, build
from local_copilot.next_edit.history import History
from local_copilot.pipeline.prepare import Preparer, prompt_bytes
from local_copilot.prompt.budget import TokenEstimator
from local_copilot.prompt.context import build_context
from local_copilot.prompt.long_lines import (
    AFTER_BYTES,
    BEFORE_BYTES,
    CUT_MARK,
    LINE_BYTES,
    cut_around,
    cut_line,
    cut_lines,
    fit_line,
    head,
    tail,
)
from local_copilot.prompt.ring import ContextRing
from local_copilot.prompt.window import WindowFitter
from local_copilot.snapshot import Snapshot

BIG = "S = '" + "a" * 150_000 + "'"


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def test_a_short_line_is_itself_and_a_long_one_keeps_its_start_and_is_marked() -> None:
    assert cut_line("x = 1") == "x = 1"
    lines = ["a", "b"]
    assert cut_lines(lines) is lines  # the usual case costs no copy
    out = cut_line(BIG)
    assert out == BIG[:LINE_BYTES] + CUT_MARK


@pytest.mark.parametrize("char", ["é", "日", "😀"])
def test_cuts_fall_between_characters(char: str) -> None:
    text = "x" + char * 1000
    for limit in range(1, 12):
        start, end = head(text, limit), tail(text, limit)
        assert _utf8(start) <= limit and text.startswith(start)
        assert _utf8(end) <= limit and text.endswith(end)
        assert _utf8(start) > limit - _utf8(char) and _utf8(end) > limit - _utf8(char)
    assert _utf8(cut_line(text)) <= LINE_BYTES + _utf8(CUT_MARK)


def test_lone_surrogates_from_invalid_utf8_are_cut_as_the_bytes_they_were() -> None:
    text = "ok" + "\udcff" * 2000  # pynvim's surrogateescape of 2000 invalid bytes
    out = cut_line(text)
    assert out.endswith(CUT_MARK) and _utf8(out[:-1]) <= LINE_BYTES


def test_the_cursor_line_keeps_the_text_nearest_the_cursor_on_both_sides() -> None:
    line = "<" * 100_000 + "|" + ">" * 100_000
    middle, rest = cut_around(line, 100_001)
    assert middle.startswith(CUT_MARK) and middle.endswith("<|") and BEFORE_BYTES - 64 < _utf8(middle) <= BEFORE_BYTES + 3
    assert rest == ">" * AFTER_BYTES + CUT_MARK
    assert cut_around("short(line)", 6) == ("short(", "line)")


def test_the_kept_start_of_the_cursor_line_stays_put_while_the_user_types() -> None:
    line = "y" * 10_000
    starts = set()
    for col in range(5000, 5000 + 40):
        middle, _ = cut_around(line[:col] + "z" * (col - 5000) + line[col:], col + (col - 5000))
        starts.add(col + (col - 5000) - (len(middle) - 1))  # where the kept part starts
    assert len(starts) <= 2


def test_the_budget_cuts_the_cursor_line_shorter_within_its_room() -> None:
    middle, rest = cut_around("m" * 5000 + "s" * 5000, 5000)
    m, r = fit_line(middle, rest, 300)
    assert _utf8(m) + _utf8(r) <= 300 and m.endswith("m") and r.startswith("s")
    assert m.startswith(CUT_MARK) and r.endswith(CUT_MARK) and m.count(CUT_MARK) == 1 and r.count(CUT_MARK) == 1
    assert fit_line("ab", "cd", 300) == ("ab", "cd")


def _snap(lines: list[str], row: int, col: int, **kw: object) -> Snapshot:
    return Snapshot(buf=1, tick=1, row=row, col=col, first=0, lines=lines, **kw)  # type: ignore[arg-type]


CFG = msgspec.convert({}, Config)


def test_a_150kb_line_four_lines_above_the_cursor_never_overflows_the_context() -> None:
    """The finding: a long literal near the cursor made every request exceed the server's
    context (an anchored start above the budget's cut took the line whole)."""
    lines = ["import os", BIG, "x = 1", "y = 2", "z = 3", "def f():", "\t"]
    prep = Preparer()
    for speed in (False, True):
        if speed:  # a measured server sizes and anchors the window (prompt/speed.py)
            prep.speed.observe({"prompt_n": 500, "prompt_ms": 5000.0, "predicted_n": 10, "predicted_ms": 500.0})
        out = prep.prepare(_snap(lines, 6, 1), CFG, 2048, ())
        assert prompt_bytes(out.req) < 2048  # (at a byte per token: what the tiny model spends)
        assert BIG[:LINE_BYTES] + CUT_MARK + "\n" in out.req.prefix and "def f():\n" in out.req.prefix


def test_an_anchored_start_never_takes_more_than_the_room() -> None:
    # a window whose anchor above the budget's cut would take lines costing far more than the room
    lines = [f"line_{i} = '" + "q" * 400 + "'" for i in range(64)] + ["x"]
    fitter = WindowFitter()
    est = TokenEstimator()
    for row_budget in (64, 120, 300):
        got = fitter.fit(_snap(lines, 64, 1), lines_before=200, lines_after=0, budget=row_budget, est=est,
                         prefix_share=0.75, anchor=True, room=2 * row_budget, least_bytes=512)
        assert est.tokens(got.ctx.prefix + got.ctx.middle + got.ctx.suffix) + len(got.ctx.prev_lines) <= 2 * row_budget


def test_a_1mb_cursor_line_makes_a_bounded_prompt_cheaply() -> None:
    line = "\tx = '" + "b" * 1_000_000 + "'"
    lines = ["def f():", line, "\treturn x"]
    prep = Preparer()
    for limit in (None, 4096, 300):
        out = prep.prepare(_snap(lines, 1, 500_000), CFG, limit, ())
        assert prompt_bytes(out.req) <= BEFORE_BYTES + AFTER_BYTES + 100
        assert out.req.middle.endswith("b") and out.req.suffix.endswith("\n\treturn x")
    started = time.perf_counter()
    for col in range(500_000, 500_050):
        prep.prepare(_snap(lines, 1, col), CFG, 4096, ())
    assert (time.perf_counter() - started) / 50 < 0.005  # nothing proportional to the line's size


def test_a_line_whose_start_the_editor_left_out_keeps_the_cursor_where_it_is() -> None:
    # Lua sent bytes 4096.. of the line (line_from), the cursor at byte 10000 of the buffer's line
    sent = "c" * 5904 + "|" + "d" * 100
    ctx = build_context(Snapshot(buf=1, tick=1, row=0, col=10_000, first=0, lines=[sent], line_from=4096),
                        lines_before=10, lines_after=10)
    assert ctx.middle.startswith(CUT_MARK) and ctx.middle.endswith("c") and ctx.line_suffix == "|" + "d" * 100


def test_chunks_yanks_history_and_edit_context_hold_long_lines_cut() -> None:
    ring = ContextRing()
    ring.chunk_from_yank("/p/a.py", ["def a():", BIG, "    return 1", "def b():", "    return 2"])
    assert ring.chunks and all(len(ln) <= LINE_BYTES + 1 for ln in ring.chunks[0].text.split("\n"))
    history = History()
    # (as NextEdits.record hands them over)
    history.record("/p/a.py", 3, list(cut_lines([BIG])), list(cut_lines([BIG + "z"])))
    assert all(len(ln) <= LINE_BYTES + 1 for e in history.events() for ln in (*e.old, *e.new))
    prompt = build(EditSpec(lines=["x = 1"], before=["import os", BIG], after=[BIG], instruction="go"), None, 64)
    assert sum(len(m["content"]) for m in prompt.messages) < 4 * LINE_BYTES


async def test_a_next_edit_region_holding_a_cut_line_is_not_asked_about() -> None:
    from local_copilot.next_edit.formats import FORMATS, EditContext
    from local_copilot.next_edit.request import ask

    lines = ["def a():", BIG, "    return 1"]
    ctx = EditContext(path="a.py", lines=tuple(cut_lines(lines)), first=0, row=1, col=3)
    # (no server: nothing is sent)
    out = await ask(None, FORMATS["zeta"], ctx, [], 64, cut_rows=frozenset({1}))  # type: ignore[arg-type]
    assert out.edit is None and out.answer == "" and out.why == "a line in the region is too long to rewrite"
    assert len(out.prompt.text) < 4 * LINE_BYTES and "a" * 100 + CUT_MARK in out.prompt.text
