"""The next-edit formats against prompts written by hand from each published specification
(sources in python/local_copilot/next_edit/formats.py), and their answers read back."""

from __future__ import annotations

import pytest

from local_copilot.next_edit.edit import Edit, edit_between
from local_copilot.next_edit.formats import EditContext, Sweep, Zeta, Zeta2, detect
from local_copilot.next_edit.history import EditEvent

# the user renamed the parameter `w` to `width` and stands after it; its use below is next
LINES = ("def area(width, h):", "    return w * h", "", "print(area(2, 3))")
CTX = EditContext(path="calc.py", lines=LINES, first=0, row=0, col=14)
RENAME = EditEvent("calc.py", 0, ("def area(w, h):",), ("def area(width, h):",), 0.0)
UPDATED = "def area(width, h):\n    return width * h\n\nprint(area(2, 3))"


def test_sweep_prompt_follows_the_model_card() -> None:
    # huggingface.co/sweepai/sweep-next-edit-v2-7B "Prompt format": file context, recent
    # changes as original:/updated: blocks under {path}.diff, then original/ (before the last
    # edit), current/ (with <|cursor|>) and updated/, each headed {path}:{start}:{end}
    expected = (
        "<|file_sep|>calc.py\n"
        "def area(width, h):\n    return w * h\n\nprint(area(2, 3))\n"
        "<|file_sep|>calc.py.diff\n"
        "original:\ndef area(w, h):\n"
        "updated:\ndef area(width, h):\n"
        "<|file_sep|>original/calc.py:1:4\n"
        "def area(w, h):\n    return w * h\n\nprint(area(2, 3))\n"
        "<|file_sep|>current/calc.py:1:4\n"
        "def area(width<|cursor|>, h):\n    return w * h\n\nprint(area(2, 3))\n"
        "<|file_sep|>updated/calc.py:1:4\n"
    )
    prompt = Sweep().build(CTX, [RENAME])
    assert prompt.text == expected
    assert prompt.stop == ("<|file_sep|>", "<|endoftext|>")
    assert (prompt.start, prompt.end) == (0, 4)


def test_sweep_prefills_the_rows_above_the_cursor() -> None:
    ctx = EditContext(path="calc.py", lines=LINES, first=0, row=1, col=4)
    prompt = Sweep().build(ctx, [])
    assert prompt.text.endswith("<|file_sep|>updated/calc.py:1:4\ndef area(width, h):\n")
    assert "calc.py.diff" not in prompt.text
    # the answer continues the prefill
    new = Sweep().parse("    return width * h\n\nprint(area(2, 3))\n", prompt)
    assert new == UPDATED.split("\n")


def test_zeta_prompt_follows_zeds_instruction_format() -> None:
    expected = (
        "### Instruction:\n"
        "You are a code completion assistant and your task is to analyze user edits and then rewrite an excerpt "
        "that the user provides, suggesting the appropriate edits within the excerpt, taking into account the "
        "cursor location.\n"
        "\n"
        "### User Edits:\n"
        "\n"
        'User edited "calc.py":\n'
        "```diff\n"
        "@@ -1 +1 @@\n"
        "-def area(w, h):\n"
        "+def area(width, h):\n"
        "```\n"
        "\n"
        "### User Excerpt:\n"
        "\n"
        "```calc.py\n"
        "<|start_of_file|>\n"
        "<|editable_region_start|>\n"
        "def area(width<|user_cursor_is_here|>, h):\n"
        "    return w * h\n"
        "\n"
        "print(area(2, 3))\n"
        "<|editable_region_end|>\n"
        "```\n"
        "\n"
        "### Response:\n"
    )
    prompt = Zeta().build(CTX, [RENAME])
    assert prompt.text == expected
    assert prompt.stop == ("\n<|editable_region_end|>",)


def test_zeta_answer_repeats_the_excerpt_with_the_region_rewritten() -> None:
    prompt = Zeta().build(CTX, [RENAME])
    answer = ("```calc.py\n<|start_of_file|>\n<|editable_region_start|>\n"
              "def area(width, h):\n    return width<|user_cursor_is_here|> * h\n\nprint(area(2, 3))")
    assert Zeta().parse(answer, prompt) == UPDATED.split("\n")
    assert Zeta().parse("I cannot help with that", prompt) is None


def test_zeta2_prompt_is_seed_coder_suffix_prefix_middle() -> None:
    expected = (
        "<[fim-suffix]>\n"
        "<[fim-prefix]><filename>edit_history\n"
        "--- a/calc.py\n"
        "+++ b/calc.py\n"
        "@@ -1 +1 @@\n"
        "-def area(w, h):\n"
        "+def area(width, h):\n"
        "\n"
        "<filename>calc.py\n"
        "<<<<<<< CURRENT\n"
        "def area(width<|user_cursor|>, h):\n"
        "    return w * h\n"
        "\n"
        "print(area(2, 3))\n"
        "=======\n"
        "<[fim-middle]>"
    )
    prompt = Zeta2().build(CTX, [RENAME])
    assert prompt.text == expected
    assert prompt.stop == (">>>>>>> UPDATED",)


def test_zeta2_prompt_puts_the_rows_after_the_region_first() -> None:
    lines = tuple(f"x{i} = {i}" for i in range(30))
    ctx = EditContext(path="a.py", lines=lines, first=100, row=115, col=0)
    prompt = Zeta2().build(ctx, [])
    # region: 10 rows each side of the cursor (105..125); the 4 rows below it are the suffix
    assert prompt.text.startswith("<[fim-suffix]>x26 = 26\nx27 = 27\nx28 = 28\nx29 = 29\n<[fim-prefix]><filename>a.py\n")
    assert "x4 = 4\n<<<<<<< CURRENT\nx5 = 5\n" in prompt.text
    assert "\n<|user_cursor|>x15 = 15\n" in prompt.text
    assert (prompt.start, prompt.end) == (105, 126)
    assert "edit_history" not in prompt.text


def test_zeta2_answer_and_no_edits() -> None:
    prompt = Zeta2().build(CTX, [RENAME])
    assert Zeta2().parse(UPDATED.replace("width *", "width<|user_cursor|> *") + "\n>>>>>>> UPDATED\n", prompt) \
        == UPDATED.split("\n")
    assert Zeta2().parse("NO_EDITS\n", prompt) is None


def test_the_edit_is_what_changed_where_it_applies() -> None:
    edit = edit_between(0, list(LINES), UPDATED.split("\n"))
    assert edit == Edit(row=1, col=12, end_row=1, end_col=12, text="idth", old="")


def test_a_rewrite_beyond_recognition_is_no_edit() -> None:
    assert edit_between(0, list(LINES), ["import os", "os.remove('/')"]) is None
    assert edit_between(0, list(LINES), list(LINES)) is None
    # blank rows a model leaves out at the end of a region are no edit
    assert edit_between(0, list(LINES) + ["", ""], list(LINES)) is None


def test_edit_columns_are_bytes() -> None:
    edit = edit_between(3, ["é = 1"], ["é = 2"])
    assert edit is not None and (edit.row, edit.col, edit.end_col, edit.text) == (3, 5, 6, "2")


@pytest.mark.parametrize(("model", "tokens", "name"), [
    ("sweep-next-edit-1.5B.Q8_0.gguf", frozenset(), "sweep"),
    ("zed-industries/zeta", frozenset(), "zeta"),
    ("zeta-2.1-Q4_K_M.gguf", frozenset(), "zeta2"),
    ("model.gguf", frozenset({"<[fim-suffix]>", "<[fim-prefix]>", "<[fim-middle]>"}), "zeta2"),
    ("model.gguf", frozenset({"<|file_sep|>"}), "sweep"),
    ("codellama", frozenset(), None),
])
def test_format_detected_from_the_served_model(model: str, tokens: frozenset[str], name: str | None) -> None:
    assert detect(model, tokens) == name
