"""Invisible and format characters in a suggestion: whether it may be shown.

A zero-width space in a name, a byte order mark in the middle of a line, a line separator
(U+2028) that a compiler reads as a line break, tag characters that spell hidden text, a
left-to-right mark that reorders what the eye reads: drawn as nothing (or, in Neovim, as a code
such as <200b> that other editors and code review draw as nothing), what Tab would insert is not
what the user reads, so such a suggestion is not shown. The whole suggestion, not the rest of
it: stripping the characters would change the model's text behind the user's back (a name or a
string that differs from what was written), and cutting there would leave half a statement.

Which characters: the Unicode categories, not a hand list — format characters (Cf: zero-width
space and joiners, the bidirectional marks, the byte order mark, soft hyphen, the interlinear
annotation characters U+FFF9-FFFB, the tag characters U+E0000-E007F), line and paragraph
separators (Zl, Zp), control characters (Cc) other than tab and newline, surrogates (Cs); and
the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0), letters that draw nothing and so write
names that look empty. Private-use characters (Co) stay: Nerd Font icons live there.

Where the text already uses them they are text: a character that appears in the lines around
the cursor is shown; the left-to-right, right-to-left and Arabic letter marks are shown where
those lines hold right-to-left letters; the zero-width joiner and non-joiner are shown inside
an emoji sequence and between the letters of a script that joins (Arabic, Persian, the Indic
scripts). The control characters and the bidirectional embeddings, overrides and isolates that
limits.py blocks are never shown, whatever the buffer holds.

Documented in :help local-copilot-foreign-tokens.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

__all__ = ["FILLERS", "HIDDEN_CATEGORIES", "hidden_char"]

HIDDEN_CATEGORIES = frozenset({"Cf", "Zl", "Zp", "Cc", "Cs"})
FILLERS = frozenset("\u115f\u1160\u3164\uffa0")
_MARKS = frozenset("\u200e\u200f\u061c")  # LRM, RLM, ALM
_JOINERS = frozenset("\u200c\u200d")  # ZWNJ, ZWJ
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _hidden(ch: str) -> bool:
    return ch in FILLERS or (ch not in "\t\n" and unicodedata.category(ch) in HIDDEN_CATEGORIES)


def _suspects(text: str) -> list[int]:
    """Indexes of the characters of `text` in a hidden category or a filler (ascending)."""
    # the common cases cost C loops only: ASCII text, and text whose every character is
    # printable (isprintable is False for the hidden categories, and for spaces, Co and Cn:
    # those are looked at one by one) and no filler
    if text.isascii():
        return [m.start() for m in _ASCII_CONTROL.finditer(text)]
    if text.replace("\t", " ").replace("\n", " ").isprintable() and not any(f in text for f in FILLERS):
        return []
    return [i for i, ch in enumerate(text) if _hidden(ch)]


# the scripts whose words take joiners (the virama's conjuncts, Persian's half-spaces)
_JOINING_SCRIPTS = (
    "ARABIC", "SYRIAC", "NKO", "MONGOLIAN", "DEVANAGARI", "BENGALI", "GURMUKHI", "GUJARATI",
    "ORIYA", "TAMIL", "TELUGU", "KANNADA", "MALAYALAM", "SINHALA", "KHMER", "MYANMAR", "TIBETAN",
)  # fmt: skip


def _joinable(ch: str) -> bool:
    """Whether a joiner next to `ch` shapes something visible: an emoji sequence's part (a
    symbol, a skin tone, the emoji presentation selector) or a letter of a joining script."""
    if not ch or ch.isascii():
        return False
    if ch == "\ufe0f" or unicodedata.category(ch) in ("So", "Sk"):
        return True
    return unicodedata.name(ch, "").startswith(_JOINING_SCRIPTS)


def _right_to_left(around: Sequence[Sequence[str]]) -> bool:
    # (only asked when a mark comes: a scan of the window's non-ASCII characters)
    return any(unicodedata.bidirectional(ch) in ("R", "AL")
               for lines in around for line in lines if not line.isascii() for ch in line)


def hidden_char(text: str, *, around: Sequence[Sequence[str]] = (), before: str = "",
                after: str = "") -> str | None:
    """The first character that keeps `text` (a suggestion) from being shown, or None.

    `around` are the lines around the cursor (a few sequences of lines), `before` and `after`
    the cursor line's text on each side of the suggestion.
    """
    at = _suspects(text)
    if not at:
        return None
    known: dict[str, bool] = {}
    rtl: bool | None = None
    for i in at:
        ch = text[i]
        if ch in _JOINERS:
            left = text[i - 1] if i > 0 else before[-1:]
            right = text[i + 1] if i + 1 < len(text) else after[:1]
            if _joinable(left) and _joinable(right):
                continue
        if ch in _MARKS:
            if rtl is None:
                rtl = _right_to_left(around)
            if rtl:
                continue
        if ch not in known:
            # (a control character or a lone surrogate is never text, wherever it is)
            known[ch] = unicodedata.category(ch) not in ("Cc", "Cs") and any(
                ch in line for lines in around for line in lines)
        if not known[ch]:
            return ch
    return None
