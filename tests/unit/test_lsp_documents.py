"""The language server's copy of a document: lines end at `\\n`, `\\r\\n` and `\\r` only (the
protocol's), edits land at positions counted that way, in the agreed encoding's units."""

from __future__ import annotations

from lsprotocol import types

from local_copilot.line_ends import line_spans, split_lines
from local_copilot.lsp.documents import Documents, apply_change

UTF16, UTF8 = types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf8


def edit(text: str, start: tuple[int, int], end: tuple[int, int], new: str, encoding: str = UTF16) -> str:
    rng = types.Range(start=types.Position(line=start[0], character=start[1]),
                      end=types.Position(line=end[0], character=end[1]))
    return apply_change(text, types.TextDocumentContentChangePartial(range=rng, text=new), encoding)


def test_only_the_protocols_line_ends_end_lines() -> None:
    text = "a\x0cb\x1c\x1d\x1e\x85\u2028\u2029c\r\nd\re\nf"
    assert split_lines(text) == ["a\x0cb\x1c\x1d\x1e\x85\u2028\u2029c", "d", "e", "f"]
    assert [text[s:e] for s, e in line_spans(text)] == split_lines(text)
    assert split_lines("") == [""] and split_lines("x\n") == ["x", ""]


def test_edits_after_characters_splitlines_breaks_at_land_on_the_clients_line() -> None:
    text = "a\x0c\nb\u2028c\nd\n"
    assert edit(text, (2, 0), (2, 1), "D") == "a\x0c\nb\u2028c\nD\n"
    assert edit(text, (1, 3), (1, 3), "!") == "a\x0c\nb\u2028c!\nd\n"


def test_columns_are_counted_in_the_encodings_units_and_clamped_to_the_line() -> None:
    text = "\U0001f600x\r\ny\r\n"
    assert edit(text, (0, 2), (0, 2), "|") == "\U0001f600|x\r\ny\r\n"  # the emoji is 2 UTF-16 units
    assert edit(text, (0, 4), (0, 4), "|", UTF8) == "\U0001f600|x\r\ny\r\n"  # and 4 bytes
    # past the line's end is its end, before its CRLF; past the last line is the document's end
    assert edit(text, (1, 99), (1, 99), "z") == "\U0001f600x\r\nyz\r\n"
    assert edit(text, (9, 0), (9, 0), "end") == "\U0001f600x\r\ny\r\nend"
    # a range joining lines across a CRLF
    assert edit(text, (0, 3), (1, 0), "") == "\U0001f600xy\r\n"


def test_a_full_change_replaces_the_text_and_an_unopened_document_is_not_changed() -> None:
    docs = Documents()
    docs.open(types.TextDocumentItem(uri="file:///p/a.py", language_id="python", version=1, text="old"))
    docs.change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri="file:///p/a.py", version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text="new\x0cline")]), UTF16)
    doc = docs.get("file:///p/a.py")
    assert doc is not None and (doc.text, doc.version, doc.path) == ("new\x0cline", 2, "/p/a.py")
    docs.change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri="file:///p/b.py", version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text="x")]), UTF16)
    assert docs.get("file:///p/b.py") is None
    assert docs.find("file:///p/b.py").text == ""  # asked about, never opened, no such file
