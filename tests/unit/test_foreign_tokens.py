"""pipeline/foreign_tokens.py: another model family's special tokens end the answer, unless
the text around the cursor, the markup or a subscript makes them text (issue 38)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from local_copilot.config import load_config
from local_copilot.pipeline.foreign_tokens import FAMILIES, cut_foreign_tokens, is_markup
from local_copilot.pipeline.postprocess import PostContext, Result, process
from local_copilot.pipeline.prepare import post_context
from local_copilot.prompt.context import build_context
from local_copilot.snapshot import Snapshot

TOKENS = sorted({t for ts in FAMILIES.values() for t in ts})


def ctx(prefix: str = "", suffix: str = "", *, prev: tuple[str, ...] = (), nxt: tuple[str, ...] = (),
        **kw: Any) -> PostContext:
    return PostContext(line_prefix=prefix, line_suffix=suffix, next_lines=nxt, prev_lines=prev, **kw)


def streamed(raw: str, c: PostContext, size: int) -> tuple[list[str], Result]:
    """The texts shown while `raw` streams in chunks of `size`, and the final result."""
    shown = []
    for end in range(size, len(raw) + size, size):
        r = process(raw[:end], c, final=False)
        shown.append(r.text)
        if r.done:
            return shown, r
    return shown, process(raw, c, final=True)


def test_the_families_named_in_the_issue_are_covered() -> None:
    for tok in ("<|endoftext|>", "<fim_suffix>", "<fim_middle>", "<EOT>", "<MID>", "<PRE>", "<SUF>", "</s>",
                "<|file_sep|>", "<|fim_pad|>", "<|im_end|>", "<end_of_turn>", "<|eot_id|>", "[SUFFIX]",
                "[PREFIX]", "[MIDDLE]", "<|fim_prefix|>", "<｜fim▁hole｜>", "<｜fim▁begin｜>", "<｜fim▁end｜>",
                "<|end_of_text|>", "<|end_of_role|>"):
        assert tok in TOKENS


@pytest.mark.parametrize("tok", TOKENS)
def test_an_answer_ends_at_another_familys_token(tok: str) -> None:
    c = ctx("    ", prev=("def f():",))
    raw = f"return 1\n    {tok}\nimport os\n"
    assert process(raw, c, final=True) == Result("return 1", True)
    for size in (1, 2, 5):
        shown, last = streamed(raw, c, size)
        assert last.text == "return 1" and last.done
        assert all("return 1".startswith(s) for s in shown), shown  # no part of the token, ever


@pytest.mark.parametrize("tok", ["<|endoftext|>", "<EOT>", "</s>", "<｜fim▁hole｜>", "<|eot_id|>"])
def test_on_the_cursor_line_the_text_before_the_token_stays(tok: str) -> None:
    c = ctx("x = ", ")", filetype="python")
    assert process(f"len(a{tok}junk", c, final=True).text == "len(a"
    # the token split over chunks anywhere: never a piece of it on screen
    raw = f"len(a{tok}junk"
    for size in (1, 3):
        shown, last = streamed(raw, c, size)
        assert last.text == "len(a"
        assert all("len(a".startswith(s) for s in shown), shown


def test_a_token_already_in_the_text_around_the_cursor_is_text() -> None:
    # a file about tokens (a prompt template, these very tests): writing about them still works
    c = ctx("    ", prev=("STOP = (", '    "<|endoftext|>",', '    "<|fim_pad|>",'))
    assert process('"<|endoftext|>",', c, final=True).text == '"<|endoftext|>",'
    # ... but one it does not hold yet still ends the answer
    assert process('"<|im_end|>",', c, final=True).text == '"'
    below = ctx("x = ", nxt=("# <EOT> ends CodeLlama's answers",))
    assert process("'<EOT>'", below, final=True).text == "'<EOT>'"


def test_the_served_models_own_tokens_are_cut_wherever_they_are() -> None:
    c = ctx("", prev=("# <|fim_middle|> marks the middle",), stop_strings=("<|fim_middle|>",))
    assert process("a<|fim_middle|>b", c, final=True).text == "a"


@pytest.mark.parametrize("ft", ["html", "xml", "markdown", "vue", "svg", "html.handlebars", "typescriptreact"])
def test_in_markup_strikethrough_and_pre_are_tags(ft: str) -> None:
    assert is_markup(ft)
    assert process("<s>old</s> new", ctx("", filetype=ft), final=True).text == "<s>old</s> new"
    assert process("price</s>", ctx("<s>old ", filetype=ft), final=True).text == "price</s>"
    assert process("<PRE>code", ctx("", filetype=ft), final=True).text == "<PRE>code"
    # another family's token is no tag, in markup or not
    assert process("text<|endoftext|>x", ctx("", filetype=ft), final=True).text == "text"


@pytest.mark.parametrize("ft", ["python", "c", "lua", "", "javascript"])
def test_outside_markup_the_end_of_sentence_token_ends_the_answer(ft: str) -> None:
    assert not is_markup(ft)
    assert process("return x</s>", ctx("    ", filetype=ft), final=True).text == "return x"
    assert process("<PRE>x", ctx("", filetype=ft), final=True).text == ""
    # an <s> the answer (or the line) opened makes </s> its closing tag (JSX in a .js file)
    assert process("<s>old</s>", ctx("return ", filetype=ft), final=True).text == "<s>old</s>"
    assert process("old</s>;", ctx("return <s>", filetype=ft), final=True).text == "old</s>;"


def test_a_bracketed_name_after_a_name_is_a_subscript() -> None:
    assert process("config[PREFIX] + x", ctx("y = "), final=True).text == "config[PREFIX] + x"
    assert process("f()[SUFFIX]", ctx("y = "), final=True).text == "f()[SUFFIX]"
    assert process("[PREFIX]x", ctx("y = "), final=True).text == ""
    assert process("1\n[SUFFIX]\nz", ctx("y = "), final=True).text == "1"
    # while streaming, a subscript's bracket is not held back
    assert cut_foreign_tokens("d[PRE", final=False) == ("d[PRE", False)
    assert cut_foreign_tokens("d = [PRE", final=False) == ("d = ", False)


def test_a_partial_token_at_the_end_is_held_then_released() -> None:
    assert cut_foreign_tokens("a <|eot", final=False) == ("a ", False)
    assert cut_foreign_tokens("a <|eot", final=True) == ("a <|eot", False)
    assert cut_foreign_tokens("a <= b", final=False) == ("a <= b", False)
    assert cut_foreign_tokens("<｜fim▁", final=False) == ("", False)


def test_the_answer_is_cut_at_the_first_token_and_says_so() -> None:
    assert cut_foreign_tokens("a<|im_end|>b<EOT>", final=True) == ("a", True)
    assert cut_foreign_tokens("plain text", final=True) == ("plain text", False)


def test_the_cursor_lines_name_before_the_answer_makes_a_subscript() -> None:
    assert cut_foreign_tokens("[PREFIX]]", before="x = config", final=True) == ("[PREFIX]]", False)
    assert cut_foreign_tokens("[PREFIX]]", before="x = ", final=True) == ("", True)


def test_an_s_tag_opened_in_the_lines_around_makes_the_end_of_sentence_token_its_closing_tag() -> None:
    around = (["<s>struck", "more"], ["after"])
    assert cut_foreign_tokens("text</s>", around=around, final=True) == ("text</s>", False)
    assert cut_foreign_tokens("text</s>", around=(["plain"],), final=True) == ("text", True)


def test_a_compound_filetype_is_markup_when_any_part_is() -> None:
    assert is_markup("jinja.html") and is_markup("HTML")
    assert not is_markup("python.django")


def test_the_help_lists_every_token_by_family() -> None:
    root = Path(__file__).resolve().parents[2]
    help_text = root.joinpath("doc", "local_copilot.txt").read_text(encoding="utf-8")
    block = help_text.split("Another family's tokens:\n", 1)[1].split("\n\n", 1)[0]
    listed: dict[str, tuple[str, ...]] = {}
    family = ""
    for line in block.splitlines():
        if not line.startswith("    "):  # a family's name, its tokens on the lines below
            family = line.strip().removesuffix(":")
            listed[family] = ()
        else:
            listed[family] += tuple(re.findall(r"`([^`]+)`", line))
    assert listed == FAMILIES
    for tok in TOKENS:
        assert f"`{tok}`" in help_text, tok


def test_the_buffers_filetype_reaches_the_post_processor() -> None:
    snap = Snapshot(buf=1, tick=1, row=1, col=4, first=0, lines=["<p>", "old "], ft="html", path="a.html")
    pctx = post_context(snap, build_context(snap, lines_before=5, lines_after=5), load_config(), ())
    assert pctx.filetype == "html"
    assert process("new</s> text", pctx, final=True).text == "new</s> text"
