"""The documents the language server keeps in sync, and the snapshot of one at a position.

The server keeps each open document's text itself, from the client's `didOpen`, `didChange`
(a full change replaces the text, an incremental one edits a range) and `didClose`. pygls keeps
a copy too, but finds its lines with `str.splitlines`, which also ends a line at a form feed
(`^L`) or U+2028: every edit after one landed on the wrong line. Here lines end where
line_ends.py says (`\\r\\n`, `\\r`, `\\n`, the protocol's), for the ranges of edits as for the
positions of requests, and a position's column is counted in the encoding the client and
server agreed on. A column past the end of its line is the line's end, a line past the last is
the document's end.

What the completion pipeline needs is a `Snapshot`, the value Neovim's Lua side sends on each
keystroke: a buffer number, a tick, the cursor row and byte column, and a window of lines around
it (as many as `context` asks for, as trigger.lua sends).
"""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types
from pygls.uris import to_fs_path, urlparse

from ..config import Config
from ..line_ends import line_spans, split_lines
from ..log import log
from ..snapshot import Snapshot, char_to_byte_col

__all__ = ["Document", "Documents", "Spot", "apply_change", "column", "offset"]

# a document asked about that was never opened is read from its file, this much at most
_UNOPENED_MAX_BYTES = 4 * 1024 * 1024


def column(line: str, character: int, encoding: str) -> int:
    """The index into `line` (code points) of a position's `character`, counted in
    `encoding`'s units; past the end of the line is its end."""
    if encoding == types.PositionEncodingKind.Utf32 or line.isascii():
        return min(character, len(line))
    width = 2 if encoding == types.PositionEncodingKind.Utf16 else None
    units = 0
    for i, ch in enumerate(line):
        if units >= character:
            return i
        cp = ord(ch)
        if width is None:  # utf-8
            units += 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4
        else:
            units += 2 if cp >= 0x10000 else 1
    return len(line)


def offset(text: str, position: types.Position, encoding: str) -> int:
    """The index into `text` of `position`."""
    for row, (start, end) in enumerate(line_spans(text)):
        if row == position.line:
            return start + column(text[start:end], position.character, encoding)
    return len(text)


def apply_change(text: str, change: types.TextDocumentContentChangeEvent, encoding: str) -> str:
    """`text` after one of a `didChange`'s changes."""
    if not isinstance(change, types.TextDocumentContentChangePartial):
        return change.text
    start = offset(text, change.range.start, encoding)
    end = offset(text, change.range.end, encoding)
    start, end = min(start, end), max(start, end)
    return text[:start] + change.text + text[end:]


def _path(uri: str) -> str:
    """A file URI's path; another scheme's path part (`untitled:x` is `x`), as pygls names it."""
    path = to_fs_path(uri)
    return path if path is not None else urlparse(uri)[2]


@dataclass
class Document:
    uri: str
    text: str
    version: int | None
    language: str
    path: str  # the file's path (see _path)


@dataclass(frozen=True)
class Spot:
    """A position in a document: its snapshot, and the document's lines with the cursor's
    row and column in code points (what typing through compares)."""

    snap: Snapshot
    lines: list[str]
    col: int
    indent: str  # the cursor line's leading whitespace, up to the cursor
    language: str


class Documents:
    """The open documents' text, a buffer number per document (the pipeline keeps its prompt
    state per buffer) and the snapshots of their positions."""

    def __init__(self) -> None:
        self._docs: dict[str, Document] = {}
        self._bufs: dict[str, int] = {}
        self._last_buf = 0
        self._seq = 0

    def open(self, item: types.TextDocumentItem) -> None:
        self._docs[item.uri] = Document(item.uri, item.text, item.version, item.language_id or "", _path(item.uri))

    def change(self, params: types.DidChangeTextDocumentParams, encoding: str) -> None:
        doc = self._docs.get(params.text_document.uri)
        if doc is None:
            log.warning("a change of %s, which is not open: ignored", params.text_document.uri)
            return
        for change in params.content_changes:
            doc.text = apply_change(doc.text, change, encoding)
        doc.version = params.text_document.version

    def get(self, uri: str) -> Document | None:
        """The open document `uri`."""
        return self._docs.get(uri)

    def find(self, uri: str) -> Document:
        """The open document `uri`, else its file as it is on disk (a client may ask about a
        document it did not open; the text is empty where there is no such file)."""
        doc = self._docs.get(uri)
        if doc is not None:
            return doc
        text = ""
        if to_fs_path(uri) is not None:
            try:
                with open(_path(uri), "rb") as f:
                    text = f.read(_UNOPENED_MAX_BYTES).decode("utf-8", errors="replace")
            except OSError:
                pass
        return Document(uri, text, None, "", _path(uri))

    def buf(self, uri: str) -> int:
        buf = self._bufs.get(uri)
        if buf is None:
            self._last_buf += 1
            buf = self._bufs[uri] = self._last_buf
        return buf

    def close(self, uri: str) -> int | None:
        """The document was closed: its buffer number, which is not used again."""
        self._docs.pop(uri, None)
        return self._bufs.pop(uri, None)

    def spot(self, doc: Document, position: types.Position, cfg: Config, encoding: str) -> Spot:
        lines = split_lines(doc.text)
        if len(lines) > 1 and lines[-1] == "" and position.line < len(lines) - 1:
            lines.pop()  # the file's final line end ends its last line, as in Neovim's buffer
        row = min(max(position.line, 0), len(lines) - 1)
        line = lines[row]
        col = column(line, position.character, encoding) if position.line == row else len(line)
        first = max(0, row - cfg.context.lines_before)
        last = min(len(lines), row + 1 + cfg.context.lines_after)
        self._seq += 1
        snap = Snapshot(buf=self.buf(doc.uri), tick=doc.version if doc.version is not None else self._seq,
                        row=row, col=char_to_byte_col(line, col), first=first, lines=lines[first:last],
                        nlines=len(lines), ft=doc.language, path=doc.path, seq=self._seq)
        head = line[:col]
        indent = head[:len(head) - len(head.lstrip(" \t"))]
        return Spot(snap, lines, col, indent, doc.language)
