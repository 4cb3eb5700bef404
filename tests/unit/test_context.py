from __future__ import annotations

from local_copilot.prompt.context import build_context, indent_width
from local_copilot.snapshot import Snapshot, byte_to_char_col, char_to_byte_col


def snap(lines: list[str], row: int, col: int, first: int = 0, ts: int = 8) -> Snapshot:
    return Snapshot(buf=1, tick=1, row=row, col=col, first=first, lines=lines, ts=ts)


def test_byte_columns_become_code_points_with_cjk_and_emoji() -> None:
    line = "x = '漢字🙂' + y"
    for i in range(len(line) + 1):
        assert byte_to_char_col(line, char_to_byte_col(line, i)) == i


def test_context_splits_at_the_cursor_in_whole_lines() -> None:
    lines = ["import os", "def f(名前):", "\treturn 名前 + 1", "", "x = 1"]
    s = snap(lines, row=2, col=len("\treturn 名前".encode()))
    ctx = build_context(s, lines_before=10, lines_after=10)
    assert ctx.prefix == "import os\ndef f(名前):\n"
    assert ctx.middle == "\treturn 名前"
    assert ctx.line_suffix == " + 1"
    assert ctx.suffix == " + 1\n\nx = 1"
    assert ctx.indent == 8
    assert ctx.next_lines == ("", "x = 1")


def test_window_offsets_and_limits() -> None:
    lines = [f"l{i}" for i in range(10)]
    s = snap(lines, row=105, col=1, first=100)
    ctx = build_context(s, lines_before=2, lines_after=1)
    assert ctx.prefix == "l3\nl4\n"
    assert ctx.middle == "l"
    assert ctx.suffix == "5\nl6"


def test_indent_width_expands_tabs() -> None:
    assert indent_width("\t  x", 4) == 6
    assert indent_width("  \tx", 8) == 8
