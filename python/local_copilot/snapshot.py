"""What Lua sends on each keystroke: one frozen value, converted once with msgspec."""

from __future__ import annotations

import msgspec

__all__ = ["Snapshot", "byte_to_char_col", "char_to_byte_col"]


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    buf: int
    tick: int  # b:changedtick when the snapshot was taken
    row: int  # 0-based cursor row
    col: int  # 0-based cursor column in BYTES (Neovim's unit)
    first: int  # 0-based row of lines[0]
    lines: list[str]  # a window of the buffer around the cursor
    nlines: int = 0  # lines in the whole buffer
    ft: str = ""
    path: str = ""
    # 'expandtab'; None: not known (a language client, the CLI), the buffer's lines tell
    et: bool | None = None
    sw: int = 4  # shiftwidth (0 = tabstop)
    ts: int = 8  # tabstop
    # a monotonically increasing id from Lua; the render plan echoes it back
    seq: int = 0
    # the smoothed interval between the user's keystrokes (ms), as the editor measures it
    interval: float | None = None
    # bytes of the cursor's line before `line` starts: the editor left out the start of a long
    # line (prompt/long_lines.py); `col` still counts from the line's real start
    line_from: int = 0

    @property
    def line(self) -> str:
        return self.lines[self.row - self.first]

    @property
    def char_col(self) -> int:
        return byte_to_char_col(self.line, self.col - self.line_from)


def _encode(text: str) -> bytes:
    # pynvim decodes invalid UTF-8 with surrogateescape; round-trip it byte-exactly
    return text.encode("utf-8", "surrogateescape")


def byte_to_char_col(line: str, col: int) -> int:
    """Neovim columns are bytes, Python strings are code points."""
    if line.isascii():  # one byte per character (a lone surrogate is not ASCII): no copies
        return max(0, min(col, len(line)))
    # (the first `col` characters hold at least `col` bytes: a long line is not encoded whole)
    raw = _encode(line[:max(0, col)])
    col = max(0, min(col, len(raw)))
    return len(raw[:col].decode("utf-8", "surrogateescape"))


def char_to_byte_col(line: str, char_col: int) -> int:
    return len(_encode(line[:char_col]))
