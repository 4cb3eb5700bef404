"""ghost/render.py: the render plans Lua draws, and the snapshot an accept leads to."""

from __future__ import annotations

from local_copilot.ghost.render import accepted_snapshot, candidate, plan
from local_copilot.ghost.words import word_stops
from local_copilot.snapshot import Snapshot


def test_accepted_snapshot_moves_the_cursor_to_the_end_of_the_text() -> None:
    s = Snapshot(buf=1, tick=5, row=10, col=len("x = 名".encode()), first=8, lines=["a", "b", "x = 名(1)", "c"])
    after = accepted_snapshot(s, "foo\n  bar")
    assert after.lines == ["a", "b", "x = 名foo", "  bar(1)", "c"]
    assert (after.row, after.col) == (11, len("  bar"))
    assert after.line[: after.char_col] == "  bar"


def test_accepting_one_line_moves_the_cursor_along_it_in_bytes() -> None:
    s = Snapshot(buf=2, tick=5, row=0, col=4, first=0, lines=["x = ", "y"], nlines=2, ft="python", path="a.py")
    after = accepted_snapshot(s, "'é'")
    assert after.lines == ["x = 'é'", "y"] and after.nlines == 2
    assert (after.row, after.col) == (0, len("x = 'é'".encode()))
    # (no changedtick or sequence number of its own: the editor has not sent it)
    assert (after.tick, after.seq) == (-1, -1)
    assert (after.buf, after.ft, after.path) == (2, "python", "a.py")


def test_accepting_lines_counts_them_into_the_buffers_length() -> None:
    s = Snapshot(buf=1, tick=1, row=0, col=0, first=0, lines=[""], nlines=1)
    after = accepted_snapshot(s, "a\nb\nc")
    assert after.lines == ["a", "b", "c"] and after.nlines == 3 and (after.row, after.col) == (2, 1)


def test_on_a_long_line_shown_from_its_middle_the_cursor_keeps_the_left_out_start() -> None:
    # the editor sent the line from byte 100 on; `col` counts from the line's real start
    s = Snapshot(buf=1, tick=1, row=0, col=103, first=0, lines=["abc"], line_from=100)
    one = accepted_snapshot(s, "de")
    assert one.lines == ["abcde"] and one.col == 105 and one.line_from == 100
    # a new line starts at its real start
    two = accepted_snapshot(s, "d\nef")
    assert two.lines == ["abcd", "ef"] and (two.row, two.col, two.line_from) == (1, 2, 0)


def test_a_candidate_carries_where_accept_word_stops() -> None:
    c = candidate("foo(bar)\nbaz")
    assert c.text == "foo(bar)\nbaz" and c.words == word_stops("foo(bar)\nbaz")


def test_a_plan_is_drawn_at_the_snapshots_cursor_with_the_first_candidate_shown() -> None:
    s = Snapshot(buf=3, tick=7, row=4, col=2, first=0, lines=[""] * 5, seq=11)
    p = plan(s, ["one", "two"], final=True, cached=True)
    assert (p.buf, p.tick, p.row, p.col, p.seq) == (3, 7, 4, 2, 11)
    assert [c.text for c in p.items] == ["one", "two"] and p.index == 0
    assert p.final and p.cached
    assert not plan(s, ["one"], final=False).cached
