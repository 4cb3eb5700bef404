"""A suggestion's indentation written the buffer's way (local_copilot/indentation.py): the style
and widths from the buffer's options and the lines around the cursor, the conversion of each
line's leading whitespace, the post-processor's last stage, and the menu's relative indentation
compared by width."""

from __future__ import annotations

import pytest

from local_copilot.config import load_config
from local_copilot.indentation import (
    IndentStyle,
    buffer_style,
    columns,
    fill,
    restyle,
    restyle_line,
    restyle_lines,
)
from local_copilot.lsp.items import completion_list, relative_indent
from local_copilot.pipeline.postprocess import PostContext, process
from local_copilot.pipeline.prepare import post_context
from local_copilot.prompt.context import build_context
from local_copilot.snapshot import Snapshot

SPACES4 = IndentStyle(spaces=True, tabstop=4, tab=4)
TABS4 = IndentStyle(spaces=False, tabstop=4, tab=4)

MODEL = "if x:\n\t\treturn 1"  # the finding's model text: a tab-indented body


def style(lines: list[str], et: bool | None, sw: int = 4, ts: int = 4) -> IndentStyle | None:
    return buffer_style(lines, expandtab=et, shiftwidth=sw, tabstop=ts)


# -- the style ----------------------------------------------------------------------------------


def test_the_options_decide_where_the_lines_around_agree_or_say_nothing() -> None:
    assert style(["def f(x):", "    "], True) == SPACES4
    assert style(["def f(x):", "\t"], False) == TABS4
    assert style(["", "x = 1"], True) == SPACES4  # nothing indented: the options
    assert style(["", "x = 1"], False) == TABS4


def test_a_tab_is_one_indentation_level_under_expandtab_and_one_tab_stop_otherwise() -> None:
    # Python's ftplugin: sw=4 ts=8 et: the model's tab is one level, as vim.snippet reads it
    assert style(["    x = 1"], True, sw=4, ts=8) == IndentStyle(True, 8, 4)
    assert style(["    x = 1"], True, sw=0, ts=2) == IndentStyle(True, 2, 2)  # sw=0: the tabstop
    assert style(["\tx = 1"], False, sw=4, ts=8) == IndentStyle(False, 8, 8)


def test_the_lines_around_win_where_they_are_indented_the_other_way() -> None:
    # tab-indented Python with 'expandtab' set (its ftplugin): spaces beside tabs are a TabError
    assert style(["def main():", "\t"], True, sw=4, ts=8) == IndentStyle(False, 8, 8)
    # spaces past a tab stop under Neovim's default 'noexpandtab': tabs would mix into them
    # (a tab the model wrote: the step the lines indent by)
    assert style(["if a:", "    b = 1", "    if c:", "        d"], False, sw=8, ts=8) == IndentStyle(True, 8, 4)
    # a space-indented file without one tab nearby, under 'noexpandtab' (no ftplugin): the
    # model's 8 columns stay spaces, not a tab among them
    assert style(["def weekday(year, month, day):", '    """Return weekday."""', "    if year:"],
                 False, sw=8, ts=8) == IndentStyle(True, 8, 4)


def test_unknown_options_follow_the_lines_around_or_leave_the_text() -> None:
    assert style(["def f():", "  if a:", "    b"], None, sw=4, ts=8) == IndentStyle(True, 8, 2)
    assert style(["func f() {", "\treturn", "}"], None, ts=8) == IndentStyle(False, 8, 8)
    assert style(["x = 1", "y = 2"], None) is None


# -- the conversion -----------------------------------------------------------------------------


def test_columns_and_fill() -> None:
    assert columns("\t\t", 0, 4) == 8
    assert columns(" \t", 0, 4) == 4 and columns("\t", 4, 4) == 8 and columns("\t", 2, 8) == 8
    assert fill(0, 8, SPACES4) == " " * 8
    assert fill(0, 10, TABS4) == "\t\t  "
    assert fill(2, 10, TABS4) == "\t\t  "  # the first tab reaches column 4
    assert fill(1, 3, TABS4) == "  "  # no tab stop between
    assert fill(5, 5, TABS4) == ""


def test_tabs_become_spaces_at_their_width_under_expandtab() -> None:
    assert restyle(MODEL, SPACES4, first_at=None) == "if x:\n        return 1"
    assert restyle_line("\t  x", SPACES4) == "      x"  # a tab, then spaces


def test_spaces_become_tabs_then_spaces_under_noexpandtab() -> None:
    assert restyle("if x:\n        return 1", TABS4, first_at=None) == "if x:\n\t\treturn 1"
    assert restyle("if x:\n      y", TABS4, first_at=None) == "if x:\n\t  y"
    assert restyle(MODEL, TABS4, first_at=None) == MODEL  # tabs already


def test_the_first_line_is_restyled_only_where_it_starts_in_the_indentation() -> None:
    # the cursor at column 4 of an empty line: the model's tab reaches column 8
    assert restyle("\treturn 1", SPACES4, first_at=4) == "    return 1"
    assert restyle("x =\t1\n\ty", SPACES4, first_at=None) == "x =\t1\n    y"  # after text: left
    assert restyle("    y", TABS4, first_at=4) == "\ty"  # from column 4 to 8: a tab


def test_restyling_twice_changes_nothing() -> None:
    # the rest of a suggestion the user typed part of is post-processed again (recheck)
    for st in (SPACES4, TABS4, IndentStyle(False, 8, 8)):
        once = restyle("a\n\t    b\n  \tc\n      d", st, first_at=0)
        assert restyle(once, st, first_at=0) == once


def test_whole_lines_a_model_rewrote_keep_the_lines_the_region_holds() -> None:
    # a next edit's or an instruction edit's lines: what the model wrote anew is restyled, a
    # line the buffer holds as it is (tab-indented there, say) stays
    old = ["\tlegacy = 1", "    y = 2"]
    got = restyle_lines(["\tlegacy = 1", "\ty = 3", "\t\tz"], SPACES4, keep=old)
    assert got == ["\tlegacy = 1", "    y = 3", "        z"]
    assert restyle_lines(["\tx"], None) == ["\tx"]


# -- the post-processor's stage ------------------------------------------------------------


def post(lines: list[str], row: int, *, et: bool | None, sw: int = 4, ts: int = 4, col: int | None = None
         ) -> PostContext:
    col = len(lines[row].encode()) if col is None else col
    snap = Snapshot(buf=1, tick=1, row=row, col=col, first=0, lines=lines,
                    nlines=len(lines), ft="python", et=et, sw=sw, ts=ts)
    return post_context(snap, build_context(snap, lines_before=50, lines_after=50), load_config(), ())


def test_the_findings_case_expandtab_writes_spaces_at_the_models_width() -> None:
    ctx = post(["def f(x):", "    "], 1, et=True)
    assert process(MODEL, ctx, final=True).text == "if x:\n        return 1"


def test_noexpandtab_writes_tabs() -> None:
    ctx = post(["def f(x):", "\t"], 1, et=False)
    assert process("if x:\n        return 1", ctx, final=True).text == "if x:\n\t\treturn 1"
    assert process(MODEL, ctx, final=True).text == MODEL


@pytest.mark.parametrize("cut", range(1, len(MODEL)))
def test_a_streamed_suggestion_is_never_taken_back(cut: int) -> None:
    ctx = post(["def f(x):", "    "], 1, et=True)
    final = process(MODEL, ctx, final=True).text
    assert final.startswith(process(MODEL[:cut], ctx, final=False).text)


def test_mid_line_text_is_not_reindented() -> None:
    ctx = post(["def f(x):", "    y = g()"], 1, et=True, col=len("    y = g("))
    # the line goes on after the cursor: one line, as the model wrote it
    assert process("a,\tb", ctx, final=True).text == "a,\tb"


def test_unknown_options_and_no_indented_line_leave_the_models_text() -> None:
    ctx = post(["x = 1", ""], 1, et=None)
    assert ctx.indent is None
    assert process(MODEL, ctx, final=True).text == MODEL


# -- the menu's relative indentation ------------------------------------------------------------


def test_relative_indentation_compares_widths_not_literal_prefixes() -> None:
    # the finding's menu case before the conversion: `\t\t` under a base of four spaces at
    # ts=4 is 8 columns, 4 past the base (a tab; the client's snippet expands it to 'shiftwidth')
    assert relative_indent(MODEL, "    ", 4) == "if x:\n\treturn 1"
    assert relative_indent("if x:\n        return 1", "    ", 4) == "if x:\n    return 1"
    assert relative_indent("if x:\n\t\treturn 1", "\t", 4) == "if x:\n\treturn 1"
    assert relative_indent("if x:\n  y", "    ", 4) == "if x:\n  y"  # shallower: as it is


def test_a_menu_item_of_a_spaces_buffer_gets_the_columns_past_the_cursor_lines_indentation() -> None:
    from lsprotocol import types

    ctx = post(["def f(x):", "    "], 1, et=True)
    text = process(MODEL, ctx, final=True).text
    got = completion_list([text], types.Position(line=1, character=4), indent="    ", language="python",
                          snippets=True, adjusts=True, tabstop=4)
    assert got.items[0].text_edit is not None
    assert got.items[0].text_edit.new_text == "if x:\n    return 1"  # the client adds the four spaces


def test_the_rules_compare_the_lines_as_the_buffer_will_hold_them() -> None:
    # Python's ftplugin (et sw=4 ts=8), the cursor in an `if` body at 8 spaces: the model's tab
    # is one level, 4 spaces, which leaves the cursor's block, so the suggestion ends there (as
    # a tab stop of 8 it would have stayed in the block and been inserted at 4)
    ctx = post(["def f(a):", "    if a:", "        "], 2, et=True, sw=4, ts=8)
    assert process("x = 1\n\ty = 2", ctx, final=True).text == "x = 1"
    assert process("x = 1\n\t\ty = 2", ctx, final=True).text == "x = 1\n        y = 2"
