"""A chat model's answer to the hole-filling prompt, as the ghost text it becomes: what chat
models put around code is cut (chat_answer.py, the post-processor's first stage in the chat
style), and the usual stages still run on what is left."""

from __future__ import annotations

import pytest

from local_copilot.pipeline.chat_answer import chat_code
from local_copilot.pipeline.postprocess import PostContext, process
from local_copilot.prompt.styles import CHAT_TURN_TOKENS

PREV = ("def area(width, height):",)


def shown(raw: str, line_prefix: str = "    return ", line_suffix: str = "", next_lines: tuple[str, ...] = ("",),
          prev_lines: tuple[str, ...] = PREV, final: bool = True) -> str:
    ctx = PostContext(line_prefix=line_prefix, line_suffix=line_suffix, next_lines=next_lines, prev_lines=prev_lines,
                      stop_strings=CHAT_TURN_TOKENS, filetype="python", chat=True)
    return process(raw, ctx, final=final).text


@pytest.mark.parametrize("raw", [
    "width * height",
    "```python\nwidth * height\n```",
    "```\nwidth * height\n```\nThis multiplies the two sides.",
    "Here is the missing code:\n```python\nwidth * height\n```",
    "Sure! The missing part:\nwidth * height",
    "<think>The area is the product.</think>\nwidth * height",
    "<think>\nmultiply\n</think>\n\n```py\nwidth * height\n```",
    "width * height<|im_end|>\n<|im_start|>user",
    "width * height<end_of_turn>",
    "`width * height`",
    "width * height\n\nThis returns the area of the rectangle.",
    # the cursor line again from its start, and the lines above it too
    "return width * height",
    "    return width * height",
    "def area(width, height):\n    return width * height",
    "width * height<CURSOR>",
])
def test_the_code_is_what_is_shown_whatever_wraps_it(raw: str) -> None:
    assert shown(raw) == "width * height"


def test_an_indented_empty_line_keeps_its_indentation_for_the_lines_after_the_first() -> None:
    # the model wrote the body at column 0: the first line goes after the indentation already
    # typed, the next ones get it too
    got = shown("```python\nw = abs(width)\nreturn w * height\n```", line_prefix="    ")
    assert got == "w = abs(width)\n    return w * height"
    # written at the cursor's own indentation: taken as it is
    got = shown("    if width < 0:\n        return 0", line_prefix="    ")
    assert got == "if width < 0:\n        return 0"


def test_an_answer_that_holds_its_prefilled_start_shows_what_follows_it() -> None:
    # llama-server's answer holds the turn's start the plugin wrote (prompt/styles.py): the
    # cursor line's text before the cursor, or at a line's start the line above too
    assert shown("    return width * height") == "width * height"
    assert shown("def area(width, height):\n    return width * height", line_prefix="") == "    return width * height"
    assert shown("    return width * height", line_prefix="    ") == "return width * height"
    # then the prompt's labels again: the answer ended before them
    assert shown("    return width * height\n\nThe code after the cursor:\nprint(area(2, 3))") == "width * height"
    assert shown("    return width * height\nThe code af", final=False) == "width * height"
    assert shown("    return width * height\nThe code af") == "width * height"
    # or talks of them: nothing of that line is code
    assert shown("    1. The code before the cursor:\n   - a function", line_prefix="    ") == ""


def test_the_text_after_the_cursor_is_not_repeated() -> None:
    # the chat model wrote the rest of the line, the part after the cursor included
    assert shown("width * height)", line_prefix="    return abs(", line_suffix=")") == "width * height"
    # and the next existing line after its answer: the usual stage stops before it
    got = shown("if width < 0:\n        return 0\n    return width * height", line_prefix="    ",
                next_lines=("    return width * height", ""))
    assert got == "if width < 0:\n        return 0"


def test_prose_alone_shows_nothing_and_no_wrapper_shows_at_all() -> None:
    assert shown("<think>I am not sure what goes here") == ""
    assert shown("```python\n```") == ""
    for token in CHAT_TURN_TOKENS:
        assert token not in shown(f"width{token} * height")


@pytest.mark.parametrize("raw", [
    "```python\nwidth * height\n```\nThis multiplies.",
    "<think>plan</think>\nreturn width * height<|im_end|>",
    "Here is the code:\nwidth * height\n\nThis returns the area.",
    "`width * height`",
])
def test_streamed_text_once_shown_is_never_taken_back(raw: str) -> None:
    final = shown(raw)
    for end in range(1, len(raw)):
        partial = shown(raw[:end], final=False)
        assert final.startswith(partial), (raw[:end], partial, final)


def test_an_unfinished_wrapper_is_held_back_while_streaming() -> None:
    for partial in ("<thi", "<think>the area", "``", "```pyth", "Here is", "width * height<|im_"):
        got = chat_code(partial, line_prefix="    return ", final=False)
        assert got.text in (None, "", "width * height"), partial
        assert not got.ended
    assert chat_code("width * height\n```", line_prefix="", final=False).text == "width * height\n```"
    fenced = chat_code("```python\nwidth * height\n``", line_prefix="", final=False)
    assert fenced.text == "width * height" and not fenced.ended


def test_the_prompts_example_answered_again_elsewhere_shows_nothing() -> None:
    # a small chat model answers the prompt's example again wherever the cursor is: code
    # that names none of the words before the cursor is the example's, not this file's
    prev = ("local function add(t, v)", "  local items = {}")
    for raw in ("width * height", "width * height * height * height", "```lua\nwidth * height\n```",
                "def area(width, height):", "def area(width, height):\n    return width * height"):
        assert shown(raw, line_prefix="  ", prev_lines=prev) == "", raw
        for end in range(1, len(raw)):  # nothing of it shows while it streams either
            assert shown(raw[:end], line_prefix="  ", prev_lines=prev, final=False) == "", raw[:end]
    # where the code before the cursor has its words, it is this file's answer
    assert shown("width * height", line_prefix="    area = ", prev_lines=("def f(width, height):",)) == "width * height"
    # other code is shown as it streams
    assert shown("items[#items + 1] = v", line_prefix="  ", prev_lines=prev) == "items[#items + 1] = v"
    assert shown("wid", line_prefix="  ", prev_lines=prev, final=False) == ""
