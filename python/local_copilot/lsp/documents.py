"""The documents the language server keeps in sync, and the snapshot of one at a position.

pygls applies the client's `didOpen`/`didChange`/`didClose` to its workspace (a full change
replaces the text, an incremental one edits a range). What the completion pipeline needs is a
`Snapshot`, the value Neovim's Lua side sends on each keystroke: a buffer number, a tick, the
cursor row and byte column, and a window of lines around it (as many as `context` asks for, as
trigger.lua sends). Lines are split at the protocol's own line ends (`\\r\\n`, `\\r`, `\\n`), and a
position's column is counted in the encoding the client and server agreed on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lsprotocol import types
from pygls.workspace import TextDocument

from ..config import Config
from ..snapshot import Snapshot, char_to_byte_col

__all__ = ["Documents", "Spot", "split_lines"]

_EOL = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """The document's lines as the protocol counts them (a final line end starts one more,
    empty line: the cursor may sit there)."""
    return _EOL.split(text) if "\r" in text else text.split("\n")


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
    """A buffer number per document (the pipeline keeps its prompt state per buffer) and the
    snapshots of their positions."""

    def __init__(self) -> None:
        self._bufs: dict[str, int] = {}
        self._last_buf = 0
        self._seq = 0

    def buf(self, uri: str) -> int:
        buf = self._bufs.get(uri)
        if buf is None:
            self._last_buf += 1
            buf = self._bufs[uri] = self._last_buf
        return buf

    def close(self, uri: str) -> int | None:
        """The document was closed: its buffer number, which is not used again."""
        return self._bufs.pop(uri, None)

    def spot(self, doc: TextDocument, position: types.Position, cfg: Config, encoding: str) -> Spot:
        lines = split_lines(doc.source)
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
                        nlines=len(lines), ft=doc.language_id or "", path=doc.path or "", seq=self._seq)
        head = line[:col]
        indent = head[:len(head) - len(head.lstrip(" \t"))]
        return Spot(snap, lines, col, indent, doc.language_id or "")
