"""Instruction edits' pure parts: the prompt (fitted to the server's context, the warm-up a
prefix of the real one) and the code kept of an answer."""

from __future__ import annotations

import pytest

from local_copilot.errors import TooLarge
from local_copilot.instruct.answer import code_lines, fit, is_prose, reindent
from local_copilot.instruct.prompt import EditSpec, build

SPEC = EditSpec(path="/src/calc.py", ft="python", lines=["def add(a, b):", "    return a + b"],
                before=[f"line_{i} = {i}" for i in range(100)], after=["", "def sub(a, b):"], instruction="add hints")


def test_the_prompt_holds_the_selection_the_code_around_it_and_the_instruction_last() -> None:
    p = build(SPEC, None, 256)
    system, user = p.messages
    assert system["role"] == "system" and "replacement code" in system["content"]
    text = user["content"]
    assert text.startswith("File: calc.py\nLanguage: python\n")
    assert "line_99 = 99\n<selection>\ndef add(a, b):\n    return a + b\n</selection>" in text
    assert "</selection>\n\ndef sub(a, b):\n</code>" in text
    assert text.endswith("Instruction: add hints")
    assert p.max_tokens == 256


def test_the_warm_up_prompt_is_a_prefix_of_the_real_one() -> None:
    warm, real = build(SPEC, 4096, 256, warm=True), build(SPEC, 4096, 256)
    assert warm.messages[:-1] == real.messages[:-1]
    assert real.messages[-1]["content"] == warm.messages[-1]["content"] + "add hints"


def test_a_small_context_keeps_the_nearest_lines_around_the_selection() -> None:
    p = build(SPEC, 400, 256)
    text = p.messages[-1]["content"]
    assert "line_99 = 99" in text and "def sub(a, b):" in text
    assert "line_0 = 0\n" not in text
    assert p.tokens + p.max_tokens <= 400


def test_a_selection_that_cannot_fit_with_its_answer_is_refused() -> None:
    big = EditSpec(lines=["x = compute(1, 2, 3)"] * 200, instruction="x")
    with pytest.raises(TooLarge, match="the server takes 512 per request"):
        build(big, 512, 256)


def test_a_follow_up_carries_the_earlier_rounds() -> None:
    spec = EditSpec(lines=["a = 1"], instruction="now 3", history=[["make it 2", "a = 2"]])
    roles = [m["role"] for m in build(spec, None, 64).messages]
    assert roles == ["system", "user", "assistant", "user"]
    assert build(spec, None, 64).messages[2]["content"] == "a = 2"


@pytest.mark.parametrize(("answer", "code"), [
    ("```python\ndef f():\n    return 1\n```\nThis returns 1.", ["def f():", "    return 1"]),
    ("Here is the updated code:\n\ndef f():\n    return 1\n", ["def f():", "    return 1"]),
    ("<think>the user wants 1</think>\ndef f():\n    return 1", ["def f():", "    return 1"]),
    ("def f():\n    return 1\n\n", ["def f():", "    return 1"]),
])
def test_code_lines_drop_fences_prose_and_reasoning(answer: str, code: list[str]) -> None:
    assert code_lines(answer, final=True) == code


@pytest.mark.parametrize(("answer", "code"), [
    # SmolLM2 135M Instruct writes the prompt's markup back (tests/integration/test_real_models.py)
    ("<code>\n    count = len(points)\n</code>", ["    count = len(points)"]),
    ("<code>\ndef centroid(points):\n<selection>\n    count = len(points)\n</selection>\n    return p\n</code>",
     ["    count = len(points)"]),
    ("```html\n<code>x</code>\n```", ["<code>x</code>"]),  # a tag inside a line is the code's own
])
def test_code_lines_drop_the_prompts_own_markup_written_back(answer: str, code: list[str]) -> None:
    assert code_lines(answer, final=True) == code


def test_a_streamed_answer_shows_whole_lines_only_and_nothing_of_an_open_reasoning_block() -> None:
    assert code_lines("```py\ndef f():\n    ret", final=False) == ["def f():"]
    assert code_lines("<think>hmm\nso", final=False) == []


def test_prose_is_told_from_code() -> None:
    assert is_prose("I'm sorry, but I can't help with that.", "python")
    assert is_prose("Sure. The function already does what you ask.", "lua")
    assert not is_prose("return a + b", "python")
    assert not is_prose("Sorry, I can't.", "markdown")  # in a prose file, prose is the answer
    assert not is_prose("```\nx = 1\n```", "python")
    assert not is_prose("Sure. The function already does what you ask", "lua")  # no sentence ends


def test_reindent_restores_the_selections_indentation_when_the_model_dropped_it() -> None:
    assert reindent(["if x:", "    y()"], ["    if a:", "        b()"]) == ["    if x:", "        y()"]
    assert reindent(["    if x:"], ["    if a:"]) == ["    if x:"]


def test_fit_keeps_the_blank_lines_around_the_selection() -> None:
    assert fit(["def g():", "    pass"], ["", "def f():", "    pass", "", ""]) == ["", "def g():", "    pass", "", ""]
    assert fit(["x = 1"], ["x = 0"]) == ["x = 1"]
    assert fit(["x = 1"], ["", ""]) == ["x = 1"]
