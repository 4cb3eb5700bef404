"""`local-copilot lsp`'s pure parts: the items made from suggestions, the snapshot of a document
position, typing through, and the options a client gives."""

from __future__ import annotations

import pytest
from lsprotocol import types

from local_copilot.config import load_config
from local_copilot.errors import ConfigError
from local_copilot.line_ends import split_lines
from local_copilot.lsp.documents import Document, Documents, column
from local_copilot.lsp.items import completion_list, inline_list, label, relative_indent, snippet_text
from local_copilot.lsp.options import ClientOptions, read_options
from local_copilot.lsp.typed import Shown

AT = types.Position(line=3, character=4)


def test_the_label_is_the_first_line_and_never_empty() -> None:
    assert label("return x\nfoo") == "return x"
    assert label("\n    return x") == "\u21b5 return x"
    assert label("\n") == "\u21b5"


def test_later_lines_lose_the_cursor_lines_indentation_for_clients_that_add_it() -> None:
    body = "if x:\n        y = 1\n    return y"
    assert relative_indent(body, "    ") == "if x:\n    y = 1\nreturn y"
    assert relative_indent("a\n\tb", "    ") == "a\n\tb"  # a line not at that indentation stays
    assert relative_indent(body, "") == body


def test_a_snippet_inserts_exactly_the_text() -> None:
    assert snippet_text("f'${x}' \\n") == "f'\\${x\\}' \\\\n"


def test_a_snippet_client_gets_the_whole_text_relative_to_the_cursor_lines_indentation() -> None:
    body = "total = 0\n    for x in xs:\n        total += x"
    got = completion_list([body, "pass"], AT, indent="    ", language="python", snippets=True, adjusts=False)
    assert got.is_incomplete is True
    first, second = got.items
    assert first.label == "total = 0" and first.preselect and not second.preselect
    assert first.sort_text < second.sort_text  # the order is the pipeline's
    assert first.insert_text_format == types.InsertTextFormat.Snippet
    assert first.insert_text_mode == types.InsertTextMode.AdjustIndentation
    assert first.text_edit == types.TextEdit(range=types.Range(start=AT, end=AT),
                                             new_text="total = 0\nfor x in xs:\n    total += x")
    assert isinstance(first.documentation, types.MarkupContent)
    assert first.documentation.value == f"```python\n{body}\n```"


def test_a_plain_text_client_that_does_not_adjust_gets_the_text_as_written() -> None:
    body = "a\n    b"
    item = completion_list([body], AT, indent="    ", language="", snippets=False, adjusts=False).items[0]
    assert item.insert_text_format == types.InsertTextFormat.PlainText
    assert item.insert_text_mode == types.InsertTextMode.AsIs
    assert isinstance(item.text_edit, types.TextEdit) and item.text_edit.new_text == body
    adjusted = completion_list([body], AT, indent="    ", language="", snippets=False, adjusts=True).items[0]
    assert isinstance(adjusted.text_edit, types.TextEdit) and adjusted.text_edit.new_text == "a\nb"


def test_the_documentation_fence_outlasts_backticks_in_the_suggestion() -> None:
    item = completion_list(["s = '```'"], AT, indent="", language="py", snippets=False, adjusts=False).items[0]
    assert isinstance(item.documentation, types.MarkupContent)
    assert item.documentation.value == "````py\ns = '```'\n````"


def test_inline_items_insert_the_text_at_the_cursor() -> None:
    got = inline_list(["x\n    y"], AT)
    assert got.items == [types.InlineCompletionItem(insert_text="x\n    y", range=types.Range(start=AT, end=AT))]


def test_columns_in_each_position_encoding() -> None:
    line = "a\u00e9\U0001f600b"  # 1 + 2 + 4 bytes in UTF-8; 1 + 1 + 2 units in UTF-16
    assert column(line, 4, types.PositionEncodingKind.Utf16) == 3
    assert column(line, 7, types.PositionEncodingKind.Utf8) == 3
    assert column(line, 3, types.PositionEncodingKind.Utf32) == 3
    assert column(line, 99, types.PositionEncodingKind.Utf16) == len(line)
    assert split_lines("a\r\nb\rc\n") == ["a", "b", "c", ""]


def _spot(text: str, line: int, character: int, **opts: object):  # noqa: ANN202
    doc = Document("file:///p/a.py", text, version=7, language="python", path="/p/a.py")
    return Documents().spot(doc, types.Position(line=line, character=character), load_config(opts), "utf-16")


def test_a_snapshot_as_lua_sends_it() -> None:
    text = "".join(f"line {i}\n" for i in range(10))
    spot = _spot(text, 5, 3, context={"lines_before": 2, "lines_after": 1})
    snap = spot.snap
    assert (snap.row, snap.col, snap.first, snap.lines, snap.nlines) == (5, 3, 3, ["line 3", "line 4", "line 5",
                                                                                   "line 6"], 10)
    assert (snap.tick, snap.path, snap.ft) == (7, "/p/a.py", "python")
    assert (len(spot.lines), spot.lines[5], spot.col) == (10, "line 5", 3)


def test_the_cursor_on_the_line_after_the_last_line_end_and_in_a_wide_line() -> None:
    spot = _spot("def f():\n", 1, 0)
    assert (spot.snap.row, spot.snap.col, spot.snap.line) == (1, 0, "")
    wide = _spot("\tx = '\u00e9'\n", 0, 7)
    assert wide.snap.col == len("\tx = '\u00e9".encode()) and wide.indent == "\t"


def test_typing_through_answers_with_the_rest_of_each_suggestion_typed_into() -> None:
    shown = Shown()
    base = _spot("def f():\n    \n", 1, 4)
    shown.keep(base.snap.path, base, ["return 1", "pass", "re"])
    typed = _spot("def f():\n    re\n", 1, 6)
    assert shown.rests(base.snap.path, typed) == ["turn 1"]  # "re" itself has nothing left
    elsewhere = _spot("def f():\n    re\nx\n", 1, 6)  # another line changed too
    assert shown.rests(base.snap.path, elsewhere) == []
    moved = _spot("def f():\n    re\n", 1, 5)  # the cursor is not after the typed text
    assert shown.rests(base.snap.path, moved) == []
    assert shown.rests(base.snap.path, base) == []  # nothing typed: the pipeline's cache answers


def test_options_from_a_client() -> None:
    base = {"n_predict": 32}
    assert read_options({}, base) is None and read_options(None, base) is None
    first = read_options(None, base, initial=True)
    assert first is not None and first.raw == base and first.start is False
    nested = read_options({"local_copilot": {"backend": "vllm", "start": True}}, base)
    assert nested is not None and nested.raw == {"n_predict": 32, "backend": "vllm"} and nested.start
    with pytest.raises(ConfigError, match=r"\$\.start"):
        read_options({"start": "yes"}, {})
    with pytest.raises(ConfigError, match="must be a table"):
        read_options("llama.cpp", {})


def test_each_source_goes_over_the_options_in_force_and_exclusions_add_up() -> None:
    opts = ClientOptions({"exclude": ["*.filed"], "n_predict": 16})
    first = opts.offer({"backend": "team", "backends": {"team": {"url": "http://gpu:8000"}}, "exclude": ["*.init"],
                        "start": True}, initial=True)
    assert first is not None and first.start
    opts.take()
    assert opts.offer({}) is None and opts.offer({"local_copilot": []}) is None  # eglot's at connect
    partial = opts.offer({"local_copilot": {"n_predict": 32, "backends": {"team": {"model": "m"}}}})
    assert partial is not None and partial.start  # (the initializationOptions' `start` stays)
    assert partial.raw == {"exclude": ["*.filed", "*.init"], "n_predict": 32, "backend": "team",
                           "backends": {"team": {"url": "http://gpu:8000", "model": "m"}}}
    opts.take()
    more = opts.offer({"exclude": ["*.set"]})
    assert more is not None and more.raw["exclude"] == ["*.filed", "*.init", "*.set"]
    opts.take()
    # settings replace the exclusions settings gave; never those of the file or initializationOptions
    fewer = opts.offer({"exclude": []})
    assert fewer is not None and fewer.raw["exclude"] == ["*.filed", "*.init"] and fewer.raw["n_predict"] == 32
    # refused options put nothing in force, except what they exclude
    opts.refuse({"n_predict": 0, "exclude": ["*.bad"], "backend": "nope"})
    after = opts.offer({"max_lines": 4})
    assert after is not None and after.raw["exclude"] == ["*.filed", "*.init", "*.set", "*.bad"]
    assert after.raw["n_predict"] == 32 and after.raw["backend"] == "team"


def test_the_lsp_subcommand_takes_an_options_file_and_the_stdio_flag_clients_pass() -> None:
    from local_copilot.cli import main as cli

    args = cli.build_parser().parse_args(["lsp", "--stdio", "--config", "/x.toml"])
    assert args.func is cli._cmd_lsp and args.config == "/x.toml"
