"""pipeline/invisible_chars.py: a suggestion holding an invisible or format character is not
shown, unless the text around the cursor already uses it (issue 38)."""

from __future__ import annotations

import unicodedata

import pytest

from local_copilot.pipeline.invisible_chars import hidden_char
from local_copilot.pipeline.postprocess import Result, process

from .test_foreign_tokens import ctx, streamed

INVISIBLE = {
    "zero_width_space": "\u200b",
    "left_to_right_mark": "\u200e",
    "right_to_left_mark": "\u200f",
    "arabic_letter_mark": "\u061c",
    "line_separator": "\u2028",
    "paragraph_separator": "\u2029",
    "byte_order_mark": "\ufeff",
    "tag_latin_a": "\U000e0041",
    "tag_cancel": "\U000e007f",
    "interlinear_anchor": "\ufff9",
    "interlinear_separator": "\ufffa",
    "interlinear_terminator": "\ufffb",
    "soft_hyphen": "\u00ad",
    "word_joiner": "\u2060",
    "zero_width_joiner": "\u200d",
    "hangul_filler": "\u3164",
}


@pytest.mark.parametrize("name", list(INVISIBLE))
def test_a_suggestion_with_an_invisible_character_is_not_shown(name: str) -> None:
    ch = INVISIBLE[name]
    for c in (ctx("x = "), ctx("x = ", ")"), ctx("    ", prev=("def f():",))):
        assert process(f"ok{ch}ay", c, final=True) == Result("", True)
        _, last = streamed(f"ok{ch}ay", c, 2)
        assert last.text == "" and last.done
    # on a later line too: the whole suggestion, not the lines before it
    assert process(f"a = 1\n    b{ch} = 2", ctx("    ", prev=("def f():",)), final=True).text == ""


@pytest.mark.parametrize("name", list(INVISIBLE))
def test_an_invisible_character_the_text_around_already_uses_is_shown(name: str) -> None:
    ch = INVISIBLE[name]
    c = ctx("x = ", prev=(f"y = 'a{ch}b'",))
    assert process(f"ok{ch}ay", c, final=True).text == f"ok{ch}ay"


def test_right_to_left_text_keeps_its_marks() -> None:
    c = ctx("msg = '", "'", prev=("# שלום עולם",))
    assert process("שלום\u200f!", c, final=True).text == "שלום\u200f!"
    assert process("مرحبا\u061c!", ctx("s = '", prev=("t = 'سلام'",)), final=True).text == "مرحبا\u061c!"
    # without right-to-left text around, a mark is hidden text
    assert process("ok\u200f!", ctx("msg = '", "'", prev=("# hello",)), final=True).text == ""


def test_joiners_inside_emoji_and_joining_scripts_are_shown() -> None:
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert process(f"'{family}'", ctx("x = "), final=True).text == f"'{family}'"
    heart = "\u2764\ufe0f\u200d\U0001f525"
    assert process(f"'{heart}'", ctx("x = "), final=True).text == f"'{heart}'"
    persian = "می\u200cخواهم"  # a half-space inside a Persian word
    assert process(f"'{persian}'", ctx("x = "), final=True).text == f"'{persian}'"
    assert process("a\u200db", ctx("x = "), final=True).text == ""
    assert process("中\u200d文", ctx("x = "), final=True).text == ""


def test_visible_non_ascii_stays() -> None:
    for text in ("'漢字\u3000かな'", "icon = '\ue0a0'", "a\u00a0b", "'é🙂'", "\t'ok'"):
        assert process(text, ctx("x = "), final=True).text == text


def test_only_what_would_be_inserted_counts() -> None:
    # the answer goes on past the cursor's block; the hidden character is in the part cut off
    c = ctx("    ", prev=("def f():",))
    assert process("return 1\ndef g():\n    s = '\u200b'\n", c, final=True).text == "return 1"


def test_every_format_and_separator_character_is_hidden() -> None:
    # the categories decide, not a list: whatever this Python's Unicode tables say
    for cp in range(0x110000):
        ch = chr(cp)
        if unicodedata.category(ch) in ("Cf", "Zl", "Zp"):
            assert hidden_char(f"a{ch}b") == ch, hex(cp)


def test_a_joiner_at_the_suggestions_edge_joins_the_cursor_lines_letters() -> None:
    # the Persian half-space typed between the text before the cursor and the suggestion
    assert hidden_char("\u200cخواهم", before="می") is None
    assert hidden_char("می\u200c", after="خواهم") is None
    assert hidden_char("\u200dx", before="a") == "\u200d"


def test_control_characters_and_lone_surrogates_are_never_text() -> None:
    assert hidden_char("a\x07b", around=(["bell = '\x07'"],)) == "\x07"
    assert hidden_char("a\udcffb", around=(["\udcff"],)) == "\udcff"


def test_tabs_newlines_and_private_use_icons_are_shown() -> None:
    assert hidden_char("\tx = 1\ny = '\ue0a0'") is None


def test_the_first_hidden_character_is_named() -> None:
    assert hidden_char("a\u200bb\u2060c") == "\u200b"
