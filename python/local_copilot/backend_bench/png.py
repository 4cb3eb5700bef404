"""A PNG chart from zlib + struct: grouped bars of generated tokens/s per concurrency level.

No plotting library: a small RGB canvas, rectangles, and a 3x5 pixel font (scaled up) for
ticks, labels and the legend. `encode_png` writes signature, IHDR, one IDAT, IEND.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence

__all__ = ["Canvas", "encode_png", "bar_chart", "nice_ticks"]

RGB = tuple[int, int, int]

WHITE: RGB = (255, 255, 255)
BLACK: RGB = (30, 30, 30)
GRID: RGB = (225, 225, 225)
AXIS: RGB = (90, 90, 90)
PALETTE: tuple[RGB, ...] = ((52, 120, 198), (232, 128, 30), (60, 160, 80), (200, 60, 60), (140, 90, 180))

# 3x5 glyphs, rows top to bottom, '#' = ink; lower case is drawn as upper case
_GLYPHS: dict[str, tuple[str, ...]] = {
    "A": (".#.", "#.#", "###", "#.#", "#.#"), "B": ("##.", "#.#", "##.", "#.#", "##."),
    "C": (".##", "#..", "#..", "#..", ".##"), "D": ("##.", "#.#", "#.#", "#.#", "##."),
    "E": ("###", "#..", "##.", "#..", "###"), "F": ("###", "#..", "##.", "#..", "#.."),
    "G": (".##", "#..", "#.#", "#.#", ".##"), "H": ("#.#", "#.#", "###", "#.#", "#.#"),
    "I": ("###", ".#.", ".#.", ".#.", "###"), "J": ("..#", "..#", "..#", "#.#", ".#."),
    "K": ("#.#", "#.#", "##.", "#.#", "#.#"), "L": ("#..", "#..", "#..", "#..", "###"),
    "M": ("#.#", "###", "###", "#.#", "#.#"), "N": ("##.", "#.#", "#.#", "#.#", "#.#"),
    "O": (".#.", "#.#", "#.#", "#.#", ".#."), "P": ("##.", "#.#", "##.", "#..", "#.."),
    "Q": (".#.", "#.#", "#.#", "##.", ".##"), "R": ("##.", "#.#", "##.", "#.#", "#.#"),
    "S": (".##", "#..", ".#.", "..#", "##."), "T": ("###", ".#.", ".#.", ".#.", ".#."),
    "U": ("#.#", "#.#", "#.#", "#.#", "###"), "V": ("#.#", "#.#", "#.#", "#.#", ".#."),
    "W": ("#.#", "#.#", "###", "###", "#.#"), "X": ("#.#", "#.#", ".#.", "#.#", "#.#"),
    "Y": ("#.#", "#.#", ".#.", ".#.", ".#."), "Z": ("###", "..#", ".#.", "#..", "###"),
    "0": ("###", "#.#", "#.#", "#.#", "###"), "1": (".#.", "##.", ".#.", ".#.", "###"),
    "2": ("##.", "..#", ".#.", "#..", "###"), "3": ("##.", "..#", ".#.", "..#", "##."),
    "4": ("#.#", "#.#", "###", "..#", "..#"), "5": ("###", "#..", "##.", "..#", "##."),
    "6": (".##", "#..", "###", "#.#", "###"), "7": ("###", "..#", ".#.", ".#.", ".#."),
    "8": ("###", "#.#", "###", "#.#", "###"), "9": ("###", "#.#", "###", "..#", "##."),
    ".": ("...", "...", "...", "...", ".#."), ",": ("...", "...", "...", ".#.", "#.."),
    "-": ("...", "...", "###", "...", "..."), "+": ("...", ".#.", "###", ".#.", "..."),
    "/": ("..#", "..#", ".#.", "#..", "#.."), "=": ("...", "###", "...", "###", "..."),
    ":": ("...", ".#.", "...", ".#.", "..."), "_": ("...", "...", "...", "...", "###"),
    "(": (".#.", "#..", "#..", "#..", ".#."), ")": (".#.", "..#", "..#", "..#", ".#."),
    "%": ("#.#", "..#", ".#.", "#..", "#.#"), " ": ("...", "...", "...", "...", "..."),
}


class Canvas:
    def __init__(self, width: int, height: int, background: RGB = WHITE) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: RGB) -> None:
        """Fill [x0, x1) x [y0, y1), clipped to the canvas."""
        x0, x1 = max(0, min(x0, x1)), min(self.width, max(x0, x1))
        y0, y1 = max(0, min(y0, y1)), min(self.height, max(y0, y1))
        if x0 >= x1:
            return
        row = bytes(color) * (x1 - x0)
        for y in range(y0, y1):
            start = (y * self.width + x0) * 3
            self.pixels[start:start + len(row)] = row

    def text(self, x: int, y: int, s: str, color: RGB = BLACK, scale: int = 2) -> int:
        """Draw `s` with its top-left at (x, y); returns the width drawn."""
        cx = x
        for ch in s.upper():
            glyph = _GLYPHS.get(ch, _GLYPHS[" "])
            for gy, row in enumerate(glyph):
                for gx, cell in enumerate(row):
                    if cell == "#":
                        self.rect(cx + gx * scale, y + gy * scale, cx + (gx + 1) * scale, y + (gy + 1) * scale, color)
            cx += 4 * scale
        return cx - x

    @staticmethod
    def text_width(s: str, scale: int = 2) -> int:
        return len(s) * 4 * scale - scale if s else 0

    def png(self) -> bytes:
        return encode_png(self.width, self.height, bytes(self.pixels))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(width: int, height: int, rgb: bytes) -> bytes:
    """8-bit RGB PNG; every scanline uses filter 0 (none)."""
    stride = width * 3
    if len(rgb) != stride * height:
        raise ValueError(f"expected {stride * height} bytes of RGB, got {len(rgb)}")
    raw = b"".join(b"\x00" + rgb[y * stride:(y + 1) * stride] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b"")


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """0 and round steps (1, 2, 2.5, 5 x 10^k) up to at least `top`."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(top / step - 1e-9)
    return [round(i * step, 10) for i in range(n + 1)]


def _label(v: float) -> str:
    if v >= 10_000:
        return f"{v / 1000:.0f}K"
    if v >= 1000:
        return f"{v / 1000:.1f}K".replace(".0K", "K")
    return f"{v:g}"


def bar_chart(groups: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]], *, title: str,
              x_label: str, width: int = 880, height: int = 500) -> bytes:
    """Grouped bars: one group per x value (`groups`), one bar per series (a backend)."""
    c = Canvas(width, height)
    left, right, top, bottom = 90, 24, 70, 70
    pw, ph = width - left - right, height - top - bottom
    values = [v for _, vs in series for v in vs if v is not None]
    ticks = nice_ticks(max(values, default=0.0))
    ymax = ticks[-1] or 1.0
    c.text(left, 18, title, BLACK, 3)
    # legend, right-aligned on the title's line
    lx = width - right
    for i, (name, _) in reversed(list(enumerate(series))):
        w = Canvas.text_width(name) + 22
        lx -= w + 16
        c.rect(lx, 48, lx + 14, 62, PALETTE[i % len(PALETTE)])
        c.text(lx + 20, 50, name, BLACK, 2)
    for t in ticks:
        y = top + ph - round(t / ymax * ph)
        c.rect(left, y, left + pw, y + 1, GRID)
        lab = _label(t)
        c.text(left - 10 - Canvas.text_width(lab), y - 5, lab, AXIS, 2)
    n_groups = max(len(groups), 1)
    gw = pw / n_groups
    bw = max(2, min(110, int(gw * 0.8 / max(len(series), 1))))
    for g, name in enumerate(groups):
        x0 = left + g * gw + (gw - bw * len(series)) / 2
        for i, (_, vs) in enumerate(series):
            v = vs[g] if g < len(vs) else None
            if v is None:
                continue
            h = round(v / ymax * ph)
            bx = int(x0 + i * bw)
            c.rect(bx, top + ph - h, bx + bw - 1, top + ph, PALETTE[i % len(PALETTE)])
            lab = _label(round(v, 1) if v < 100 else round(v))
            for scale in (2, 1):  # the value on top of the bar, as large as fits
                if Canvas.text_width(lab, scale) <= bw:
                    c.text(bx + (bw - Canvas.text_width(lab, scale)) // 2, top + ph - h - 6 * scale - 2, lab, AXIS,
                           scale)
                    break
        c.text(int(left + g * gw + gw / 2 - Canvas.text_width(name) / 2), top + ph + 10, name, AXIS, 2)
    c.rect(left, top, left + 2, top + ph + 1, AXIS)  # y axis
    c.rect(left, top + ph, left + pw, top + ph + 2, AXIS)  # x axis
    c.text(int(left + pw / 2 - Canvas.text_width(x_label) / 2), height - 28, x_label, AXIS, 2)
    return c.png()
