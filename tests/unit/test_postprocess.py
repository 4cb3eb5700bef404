from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from local_copilot.pipeline.postprocess import (
    PostContext,
    Result,
    block_indent,
    closer_cut,
    compose,
    cut_stop_strings,
    drop_duplicate_closer,
    drop_suffix_repeat,
    existing_line_cut,
    finish,
    indent_width,
    keep_first_line,
    leaves_block,
    process,
    repeat_cut,
    repeat_holdback,
    scanner,
)

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "postprocess" / "golden.json"


def ctx(
    prefix: str,
    suffix: str = "",
    next_lines: tuple[str, ...] | list[str] = (),
    prev_lines: tuple[str, ...] | list[str] = (),
    **kw: Any,
) -> PostContext:
    return PostContext(
        line_prefix=prefix,
        line_suffix=suffix,
        next_lines=tuple(next_lines),
        prev_lines=tuple(prev_lines),
        **kw,
    )


def stream(raw: str, c: PostContext, sizes: list[int] | None = None) -> tuple[list[Result], Result]:
    """Feed `raw` in chunks like the engine does; returns (streamed results, final result).

    The final result is the one at the first done=True (the caller cancels there),
    else the final=True call."""
    out: list[Result] = []
    pos, i = 0, 0
    while pos < len(raw):
        pos = min(len(raw), pos + (sizes[i % len(sizes)] if sizes else 1))
        i += 1
        r = process(raw[:pos], c, final=False)
        out.append(r)
        if r.done:
            return out, r
    return out, process(raw, c, final=True)


def assert_stream_consistent(raw: str, c: PostContext, sizes: list[int] | None = None) -> None:
    want = process(raw, c, final=True)
    shown, last = stream(raw, c, sizes)
    prev = ""
    for r in shown:
        assert want.text.startswith(r.text), (r.text, want.text)
        assert r.text.startswith(prev), (prev, r.text)  # never takes text back
        prev = r.text
    assert last.text == want.text


# --------------------------------------------------------------------------- golden cases


def _golden() -> list[dict[str, Any]]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", _golden(), ids=lambda c: c["name"])
def test_golden(case: dict[str, Any]) -> None:
    c = msgspec.convert(case["ctx"], PostContext)
    res = process(case["raw"], c, final=True)
    assert res.text == case["expected"], case["source"]
    if "done" in case:
        assert res.done is case["done"]
    assert_stream_consistent(case["raw"], c)
    assert_stream_consistent(case["raw"], c, [3, 1, 7, 2])


def test_golden_fixture_covers_the_known_failure_modes() -> None:
    names = {c["name"] for c in _golden()}
    for want in (
        "autopairs_duplicate_paren",  # copilot.lua #43
        "suffix_repeat_tail",  # llama.vim #55
        "midline_no_overwrite",
        "wrong_indent_first_line",
        "repeated_line_loop",
        "completion_equals_next_line",
        "trailing_blank_lines",
        "cjk_midline_quote",
        "tab_indented_go",
    ):
        assert want in names


# --------------------------------------------------------------------------- stage 1


def test_stop_string_cuts_at_the_earliest() -> None:
    assert cut_stop_strings("ab<EOT>cd<|x|>", ("<|x|>", "<EOT>"), final=False) == ("ab", True)
    assert cut_stop_strings("<EOT>", ("<EOT>",), final=True) == ("", True)
    assert cut_stop_strings("abc", (), final=False) == ("abc", False)
    assert cut_stop_strings("abc", ("",), final=False) == ("abc", False)


def test_stop_string_partial_tail_is_held_while_streaming() -> None:
    assert cut_stop_strings("foo<|fim", ("<|fim_pad|>",), final=False) == ("foo", False)
    assert cut_stop_strings("foo<|fim", ("<|fim_pad|>",), final=True) == ("foo<|fim", False)
    assert cut_stop_strings("foo<", ("<|a|>", "<EOT>"), final=False) == ("foo", False)


def test_stop_string_in_process_sets_done() -> None:
    c = ctx("x = ", stop_strings=("<|endoftext|>",))
    assert process("1<|endof", c, final=False) == Result("1", False)
    assert process("1<|endoftext|>2", c, final=False) == Result("1", True)


# --------------------------------------------------------------------------- stage 2


def test_keep_first_line() -> None:
    assert keep_first_line("a, b)\nmore") == ("a, b)", True)
    assert keep_first_line("a, b") == ("a, b", False)


def test_mid_line_is_one_line_and_done_at_the_newline() -> None:
    c = ctx("x = foo(", ")")
    assert process("a, b", c, final=False) == Result("a, b", False)
    assert process("a, b)\n    y = 1", c, final=False) == Result("a, b", True)
    assert process("\nfoo", c, final=False) == Result("", True)


def test_whitespace_only_suffix_is_end_of_line() -> None:
    assert process("\n    return 1", ctx("def f():", "   "), final=True).text == "\n    return 1"


# --------------------------------------------------------------------------- stage 3


@pytest.mark.parametrize(
    ("prefix", "suffix", "line", "want"),
    [
        ("foo(", ")", "a, b)", "a, b"),
        ("def f(", "):", "x):", "x"),
        ("x", " = 5", "y = 5", "y"),
        ("    return ", "x + 1", "a * x + 1", "a * "),
        ("f(", ", b)", "a,", "a"),  # a prefix of the suffix
        ("f(", ")", ")", ""),  # nothing but the suffix
        ("call(", "data, 10)", "self.data, 10)", "self."),
        ("x = ", "  # note", "5  # note", "5"),
        ("x = ", "  # note", "5 # note", "5 "),  # the suffix without its blanks
    ],
)
def test_drop_suffix_repeat(prefix: str, suffix: str, line: str, want: str) -> None:
    assert drop_suffix_repeat(line, ctx(prefix, suffix)) == want


@pytest.mark.parametrize(
    ("prefix", "suffix", "line"),
    [
        ("foo(", ")", "bar(1)"),  # the ) closes the completion's own (
        ("y = ", "x(1)", "max"),  # would split a word
        ("y = ", "xy + 1", "a + x"),  # a lone word char is too weak
        ("foo(", ")", "a, b"),
    ],
)
def test_drop_suffix_repeat_leaves_alone(prefix: str, suffix: str, line: str) -> None:
    assert drop_suffix_repeat(line, ctx(prefix, suffix)) is None


@pytest.mark.parametrize(("prev", "prefix", "suffix", "line", "want", "filetype"), [
    # a C comment's prose: the quotes of `x' do not pair, the rest of the line repeated is cut
    (["/* Flags such as"], "   the `A_*' and `", "'. flags.  */", "B_*'. flags.  */", "B_*", "c"),
    ([], "/* see `", "' and the rest */", "buf' and the rest */", "buf", "c"),
    (["/**", " * Returns"], " * the `", "' pair.", "(y' pair.", "(y", "java"),
])
def test_drop_suffix_repeat_in_a_block_comment(prev: list[str], prefix: str, suffix: str, line: str, want: str,
                                               filetype: str) -> None:
    assert drop_suffix_repeat(line, ctx(prefix, suffix, prev_lines=prev, filetype=filetype)) == want


def test_drop_suffix_repeat_outside_comments_still_weighs_brackets() -> None:
    # closed comment above, and Python (where `/*` is text): the balance rule decides as before
    c = ctx("foo(", ")", prev_lines=["/* done */"], filetype="c")
    assert drop_suffix_repeat("bar(1)", c) is None
    c = ctx("foo(", ")", prev_lines=["paths = '**/*.py'"], filetype="python")
    assert drop_suffix_repeat("bar(1)", c) is None


def test_existing_line_cut() -> None:
    c = ctx("    a = 1", "", ["", "    c = 3", "    d = 4"])
    assert existing_line_cut(["    a = 1", "    b = 2", "    c = 3", "    d = 4"], c) == 2
    # indentation matters: a statement at another depth is a different one
    assert existing_line_cut(["    a = 1", "        c = 3"], c) is None
    # trailing whitespace and tabs (expanded) do not
    c_tab = ctx("\tx", "", ["\ty = 1"], tabstop=4)
    assert existing_line_cut(["\tx", "    y = 1  "], c_tab) == 1
    # the cursor line counts only when it was blank
    assert existing_line_cut(["    c = 3"], ctx("    c = ", "", ["    c = 3"])) is None
    assert existing_line_cut(["    c = 3"], ctx("    ", "", ["    c = 3"])) == 0
    assert existing_line_cut(["x"], ctx("", "", ["", "  "])) is None


def test_streaming_holds_a_line_that_may_become_the_next_line() -> None:
    c = ctx("    a = 1", "", ["    c = 3"])
    assert process("\n    b = 2\n    c", c, final=False) == Result("\n    b = 2", False)
    assert process("\n    b = 2\n    c = 3\n", c, final=False) == Result("\n    b = 2", True)
    assert process("\n    b = 2\n    cc", c, final=False).text == "\n    b = 2\n    cc"


# --------------------------------------------------------------------------- stage 4


@pytest.mark.parametrize(
    ("prefix", "suffix", "line", "want"),
    [
        ("foo(", ")", "bar)", "bar"),
        ("foo(", ")", "g(x))", "g(x)"),
        ("foo(", ")", "bar(1)", "bar(1)"),
        ("if (", ")", "x) {", "x"),
        ("xs = [", "]", "1, 2]", "1, 2"),
        ("o = {", "}", "a: 1}", "a: 1"),
        ('print("', '")', 'hi")', "hi"),
        ('print("', '")', "it's\")", "it's"),  # ' is text inside a "-string
        ('xs = ["', '"]', 'a", "b', 'a", "b'),  # re-opened: balanced as it is
        ("foo(", ")", "a]", "a]"),  # not the closer the line has: leave it
    ],
)
def test_drop_duplicate_closer(prefix: str, suffix: str, line: str, want: str) -> None:
    assert drop_duplicate_closer(line, ctx(prefix, suffix)) == want


def test_closer_cut_multi_line() -> None:
    # the ( of the line above is closed by the existing ) on the next line
    assert closer_cut(")", ctx("    ", "", [")"], ["result = foo("]))
    assert closer_cut(")", ctx("result = foo(", "", [")"]))
    assert not closer_cut("]", ctx("    ", "", [")"], ["result = foo("]))
    # two brackets open on that line: the existing ) may close the outer one
    assert not closer_cut(")", ctx("    1, ", "", [")"], ["x = foo(bar("]))
    # not aligned with the bracket's line
    assert not closer_cut(")", ctx("    ", "", ["        )"], ["result = foo("]))
    assert not closer_cut(")", ctx("    ", "", [], ["result = foo("]))


@pytest.mark.parametrize("final", [True, False])
def test_a_completion_inside_a_line_comment_is_text(final: bool) -> None:
    # the ) the next line already has is cut from code...
    assert process("a)", ctx("x = foo(", "", [")"]), final=final) == Result("a", True)
    # ...but after a comment that starts before the cursor, brackets are words
    assert process("a) and more", ctx("x = foo(  # see (", "", [")"]), final=final).text == "a) and more"
    assert process("}", ctx("# x {", "", ["}"]), final=True) == Result("}", False)


def test_autopairs_streaming_holds_the_closer() -> None:
    c = ctx("    foo(", ")")
    assert process("bar", c, final=False).text == "bar"
    assert process("bar)", c, final=False).text == "bar"
    assert process("bar) {", c, final=False).text == "bar"
    assert process("bar) {", c, final=True).text == "bar"
    c2 = ctx('xs = ["', '"]')
    assert process('a", "b', c2, final=False).text == "a"  # held until the line is known
    assert process('a", "b', c2, final=True).text == 'a", "b'


# --------------------------------------------------------------------------- stage 5


def test_indent_width_expands_tabs() -> None:
    assert indent_width("\t\tx", 4) == 8
    assert indent_width("  \tx", 4) == 4
    assert indent_width("    x") == 4
    assert indent_width("\u3000x") == 0  # ideographic space is text, not indentation


@pytest.mark.parametrize(
    ("prefix", "prev", "want"),
    [
        ("    x = 1", (), 4),
        ("    if x:", (), 5),
        ("    if x:  # why", (), 5),
        ("function f() {", (), 1),
        ("    x = foo(", (), 5),
        ("            b)", ("    x = foo(a,",), 4),  # closes a bracket of the line above
        ('           "msg"', ("    assert x, \\",), 4),  # backslash continuation
        ("            cond:", ("    if a and \\",), 5),
        ("", ("def f():",), 1),  # blank cursor line under a header
        ("    ", ("    x = 1",), 4),
        ("", ("    x = 1",), 0),  # blank line at column 0: no claim
        ("            b)", (), 0),  # statement start out of sight: assume nothing
        ("\t\tx := 1", ("func f() {", "\tfor {"), 8),
    ],
)
def test_block_indent(prefix: str, prev: tuple[str, ...], want: int) -> None:
    assert block_indent(ctx(prefix, "", (), prev, tabstop=4 if "\t" in prefix else 8), prefix) == want


def test_a_block_the_suggestion_opens_is_nested_in_the_cursors_block() -> None:
    # only indentation typed: an `if` the model writes, then the line after it at the
    # cursor's level, is one suggestion (HumanEval's `if ...: return x` then `return y`)
    fn = ("def fib(n):",)
    assert block_indent(ctx("    ", "", (), fn), "    if n <= 1:") == 4
    assert block_indent(ctx("    if n <= 1", "", (), fn), "    if n <= 1:") == 5  # the user's header
    assert block_indent(ctx("", "", (), ()), "def helper():") == 1  # top level: one definition
    c = ctx("    ", "", (), fn)
    out = process("if n <= 1:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\n\ndef main():\n", c, final=True)
    assert out.text == "if n <= 1:\n        return n\n    return fib(n - 1) + fib(n - 2)"


def test_a_header_over_a_body_that_is_there_is_one_line() -> None:
    # the user rewrites a loop's header on an empty line above its body: the body the model
    # writes after the header would be a second one
    prev = ("def f(q, w):", "    i, j = 0, len(q) - 1")
    body = ("        if q[i] != q[j]:", "            return False")
    raw = "    while i < j:\n        if q[i] < w:\n            i += 1\n"
    assert process(raw, ctx("", "", body, prev), final=True).text == "    while i < j:"
    # streamed: the cut is decided as soon as the header's line ends
    assert process("    while i < j:\n   ", ctx("", "", body, prev), final=False) == Result("    while i < j:", True)
    # no body below (the next line is as deep as the header): the model writes it
    assert process(raw, ctx("", "", ("    return True",), prev), final=True).text == raw.rstrip("\n")
    # a header the user typed: the suggestion is its body
    assert process("\n        x = 1", ctx("    while i < j:", "", body, prev), final=True).text == "\n        x = 1"


def test_leaves_block() -> None:
    assert leaves_block("x = 1", (), 4, 8)
    assert not leaves_block("    x = 1", (), 4, 8)
    assert not leaves_block("   ", (), 4, 8)
    assert not leaves_block("}", ("{",), 1, 8)  # closes the bracket the completion opened
    assert not leaves_block(")", ("(",), 5, 8)
    assert leaves_block("foo()", ("(",), 5, 8)  # not a closer
    assert not leaves_block("text", ('"',), 5, 8)  # inside a multi-line string
    assert leaves_block("\tx", (), 8, 4)  # tab = 4 columns


def test_dedent_while_streaming_is_decided_at_the_first_char() -> None:
    c = ctx("if x:")
    assert process("\n    a()\n", c, final=False) == Result("\n    a()", False)
    assert process("\n    a()\n   ", c, final=False) == Result("\n    a()", False)
    assert process("\n    a()\ne", c, final=False) == Result("\n    a()", True)


# --------------------------------------------------------------------------- stage 6


def test_repeat_cut() -> None:
    assert repeat_cut(["a", "b", "b", "b"]) == 2
    assert repeat_cut(["a", "b", "b"]) is None  # twice happens in real code
    assert repeat_cut(["x", "", "x", "", "x"]) == 2  # blank lines between
    assert repeat_cut(["a", "b", "c", "b", "c"]) == 3
    assert repeat_cut(["a", "", "a", ""]) is None  # a block needs 2 non-blank lines
    assert repeat_cut(["q", "a  ", "b", "a", "b"]) == 3  # trailing blanks ignored
    assert repeat_cut(["a", "b", "c", "b", "c"], start=5) == 3
    assert repeat_cut([]) is None


def test_repeat_holdback() -> None:
    assert repeat_holdback(["a", "b"]) == 2
    assert repeat_holdback(["a", "b", "b"]) == 2  # may turn into b, b, b
    assert repeat_holdback(["a", "b", "c", "b"]) == 3  # may turn into b c b c
    assert repeat_holdback(["a", "x", "b", "c", "d", "b", "c"]) == 5
    assert repeat_holdback(["a", "b", "b"], "c") == 3  # the partial line breaks the run
    assert repeat_holdback(["a", "b", "b"], "") == 2
    assert repeat_holdback(["a", "b", "c", "b"], "c") == 3
    assert repeat_holdback(["a", "b", "c", "b"], "d") == 4


def test_loop_is_hidden_while_streaming_and_cut_when_sure() -> None:
    c = ctx("    xs = []")
    raw = "\n    xs.append(1)\n    xs.append(1)\n"
    assert process(raw, c, final=False) == Result("\n    xs.append(1)", False)
    assert process(raw + "    xs.append(1)\n", c, final=False) == Result("\n    xs.append(1)", True)
    assert process(raw + "    return xs", c, final=False).text == (
        "\n    xs.append(1)\n    xs.append(1)\n    return xs"
    )


# --------------------------------------------------------------------------- stages 7, 8


def test_finish() -> None:
    assert finish(["", "    a", "", "  "], 16) == "\n    a"
    assert finish(["a", "b", "c"], 2) == "a\nb"
    assert finish([" ", "\t"], 16) == ""
    assert finish(["x  "], 16) == "x"


def test_max_lines_cap_sets_done_when_reached() -> None:
    c = ctx("def f():", max_lines=3)
    assert process("\n    a\n    b", c, final=False) == Result("\n    a\n    b", False)
    assert process("\n    a\n    b\n", c, final=False) == Result("\n    a\n    b", True)


def test_whitespace_only_is_nothing() -> None:
    assert process(" \n\t\n", ctx("x = 1"), final=True) == Result("", False)
    assert process("   ", ctx("f(", ")"), final=True).text == ""


def test_mid_line_keeps_a_separating_space() -> None:
    assert process("x, ", ctx("f(a, ", "b)"), final=True).text == "x, "
    assert process("x, ", ctx("f(a, ", ")"), final=True).text == "x,"


# --------------------------------------------------------------------------- properties


def _random_cases(rng: random.Random, n: int) -> list[tuple[str, PostContext]]:
    words = ["foo", "bar(", ")", "]", "[", "{", "}", '"', "'", "x", " ", ", ", ":", "é", "漢字", "🙂",
             "\t", "#", "//", "\\", "return", "<|eot|>", "\r\n"]
    lines = ["    x = 1", "}", ")", "def f():", "\treturn y", "", "  if (a) {", "    return x"]
    out = []
    for _ in range(n):
        raw = "".join(rng.choice(words + ["\n", "\n    "]) for _ in range(rng.randint(0, 40)))
        c = ctx(
            rng.choice(["", "    ", "def f(", "    x = ", "foo(", "if x:", "\t", "print('", "  a = [1,"]),
            rng.choice(["", "", ")", "):", '")', " = 5", "]", "  "]),
            rng.sample(lines, rng.randint(0, 3)),
            rng.sample(lines, rng.randint(0, 3)),
            tabstop=rng.choice([4, 8]),
            max_lines=rng.choice([1, 3, 16]),
            stop_strings=rng.choice([(), ("<|eot|>",)]),
        )
        out.append((raw, c))
    return out


def test_streaming_never_takes_text_back_on_random_input() -> None:
    rng = random.Random(7)
    for raw, c in _random_cases(rng, 400):
        sizes = [rng.randint(1, 6) for _ in range(5)]
        assert_stream_consistent(raw, c, sizes)


def test_pure_and_deterministic() -> None:
    rng = random.Random(3)
    for raw, c in _random_cases(rng, 100):
        a = [process(raw[:i], c, final=False) for i in range(len(raw) + 1)]
        # the internal caches must not change any result
        scanner._RESUME.clear()
        compose._LOOPS.clear()
        scanner._scan_cached.cache_clear()
        b = [process(raw[:i], c, final=False) for i in range(len(raw) + 1)]
        assert a == b
        assert process(raw, c, final=True) == process(raw, c, final=True)


def test_large_outputs_stay_cheap() -> None:
    line = "foo(a, b[1], {'k': \"v\"}) + 漢字 " * 350  # ~10 KB on one line
    many = "\n".join(f"    v{i} = call(x, [1, 2], 'é🙂')" for i in range(300))
    cases = [
        (line, ctx("    x = f(", ")" + "; y = g(z)" * 200)),  # long suffix too
        (line, ctx("    x = ", "")),
        (many, ctx("def f():", max_lines=16)),
        (many, ctx("def f():", max_lines=1000)),
    ]
    for raw, c in cases:
        t0 = time.perf_counter()
        _, last = stream(raw, c, [4])
        elapsed = time.perf_counter() - t0
        assert elapsed < 5.0, elapsed  # quadratic behaviour would take minutes
        assert last == process(raw, c, final=True)


# --------------------------------------------------------------------------- evaluation


def test_eval_smoke() -> None:
    bench = pytest.importorskip("bench.postprocess_eval")
    summary, outcomes = bench.evaluate(n=45, seed=11)
    overall = summary["overall"]
    assert summary["n"] == 45
    assert overall["worse"] == 0
    assert overall["stream_violations"] == 0
    assert overall["retractions"] == 0
    assert overall["exact"] >= 0.9


# --------------------------------------------------------------------------- issue 25: exact after accept


@pytest.mark.parametrize(
    ("prefix", "suffix", "raw", "want"),
    [
        # the cursor and the end of the middle both inside words: the tail is the whole rest
        ("        reader = Reader(stri", "ode=True,", "ct_mode=True,\n    x", "ct_m"),
        ("    margin = No", "ne", "ne", ""),
        ("   a possible po", "erefore not", "int and therefore not", "int and th"),
        # a closer already after the cursor, which the insertion would double: the cut leaves
        # the line better balanced than all of it
        ("    parser.append", ")", "(option_string)", "(option_string"),
        ("extern int ", " *__buf, size_t __buflen)", "f (int __errnum, char *__buf, size_t __buflen)",
         "f (int __errnum, char"),
        ("EXPORT_API", "Handle)", "(Handle)", "("),
        # quotes: the cut balances the line where the whole insertion does not
        ("    return '\"' + ESCA", "\"'", "PE(s) + '\"", "PE(s) + '"),
        # a quote that closes the string the prefix opened, before a suffix that opens one
        ("    ['/etc/", " 'udevconf',", "udev%.conf$'] =", "udev%.conf$'] ="),
        # a space before a closer stays when the line pads that bracket (the typed text or,
        # right after a typed opener, the suggestion's own first blank): `{ a: 1 }`, never
        # the lopsided `{ a: 1}`
        ("  api.delete(bufnr, { force =", "})", " true ", " true "),
        ("const o = {", "};", " a: 1 };", " a: 1 "),
        ("const o = {", "};", "a: 1 };", "a: 1"),
    ],
)
def test_exact_after_accept_mid_line(prefix: str, suffix: str, raw: str, want: str) -> None:
    c = ctx(prefix, suffix)
    assert process(raw, c, final=True).text == want
    assert_stream_consistent(raw, c)


@pytest.mark.parametrize(
    ("prefix", "suffix", "line"),
    [
        ("y = ", "xy(1)", "max + xy"),  # a split word whose tail is not the whole rest of the line
        ("foo(", ")", "bar(1)"),  # the ) closes the completion's own (
    ],
)
def test_a_tail_that_belongs_to_the_insertion_stays(prefix: str, suffix: str, line: str) -> None:
    assert drop_suffix_repeat(line, ctx(prefix, suffix)) is None


@pytest.mark.parametrize(
    ("prefix", "raw", "prev", "nxt"),
    [
        ("total = c.computetotal", "\ntotal = c.computetotal", [], []),
        ("    x = 1", "\n    x = 1\n    x = 1\n", ["def f():"], []),
        ("    ", "x = 1", ["def f():", "    x = 1"], ["    return x"]),  # a fresh line, the one above again
        ("x = 1", "\n\n   \n", [], []),  # blank lines only
    ],
)
def test_only_repeating_the_line_above_shows_nothing(prefix: str, raw: str, prev: list[str], nxt: list[str]) -> None:
    c = ctx(prefix, "", nxt, prev)
    assert process(raw, c, final=True).text == ""
    assert_stream_consistent(raw, c)
    for cut in range(len(raw) + 1):  # nothing of it is shown while it streams either
        assert process(raw[:cut], c, final=False).text == ""


def test_a_repeat_followed_by_new_lines_is_shown() -> None:
    c = ctx("    x = 1", "", [], ["def f():"])
    raw = "\n    x = 1\n    y = 2"
    assert process(raw, c, final=True).text == raw
    assert_stream_consistent(raw, c)
    # a line at another depth is another statement
    assert process("\n        x = 1", ctx("    x = 1"), final=True).text == "\n        x = 1"


def test_preprocessor_conditionals_do_not_end_the_block() -> None:
    c = ctx("", "", [], ["static int f (int x)"])
    raw = "{\n#if defined X\n  return x;\n#endif\n}\nint g;"
    assert process(raw, c, final=True).text == "{\n#if defined X\n  return x;\n#endif\n}"
    assert_stream_consistent(raw, c)


def test_a_loop_cut_off_by_the_token_limit_is_cut() -> None:
    c = ctx("--- If th", "", [], ["local M = {}"])
    line = "--- If the indexes start from 1 and are contiguous then the array is a list."
    raw = line[len("--- If th"):] + "\n" + line + "\n" + line[:40]
    assert process(raw, c, final=True).text == line[len("--- If th"):]
    assert_stream_consistent(raw, c)


def test_a_tail_without_brackets_is_cut_where_the_middle_opens_a_call() -> None:
    # the middle opens `(` that a later line closes: the repeated tail changes no balance
    c = ctx("        _c", "_tuple, other_tuple,")
    assert process("mp_fn(name, op, self_tuple, other_tuple,\n  x", c, final=True).text == "mp_fn(name, op, self"
    assert process(") __wur;", ctx("       __isoc99_fscanf", "__wur;"), final=True).text == ") "


def test_a_closer_that_balances_the_line_stays() -> None:
    # the suffix's `)` closes the outer call once the middle closes the inner tuple
    c = ctx("        if isinstance(value, (list", "):")
    assert process(", tuple)", c, final=True).text == ", tuple)"
    assert_stream_consistent(", tuple)", c)


def test_a_closer_already_there_is_cut_when_the_statement_goes_on_below() -> None:
    for below in ("            or _is_kw_only(b, dataclasses)):", "            or (isinstance(type, str)"):
        c = ctx("        if (_is_kw_only(", ")", [below])
        assert process("type, dataclasses)", c, final=True).text == "type, dataclasses"
        assert_stream_consistent("type, dataclasses)", c)


def test_a_line_left_of_a_docstring_the_completion_opened_ends_it() -> None:
    c = ctx("    def close(", "", ["        if self._closed:"], ["class Loop:"])
    raw = 'self):\n        """Close the event loop.\nfrom .log import logger'
    assert process(raw, c, final=True).text == 'self):\n        """Close the event loop.'
    assert_stream_consistent(raw, c)
    # its text at the docstring's depth stays
    raw = 'self):\n        """Close the event loop.\n        Stops it first.'
    assert process(raw, c, final=True).text == raw


def test_a_line_left_of_a_string_the_completion_opened_ends_it() -> None:
    # the answer opens a pattern's string and runs on into a module-level line; its
    # indented text stays, and the next request (the opener before the cursor) continues
    # the string uncut
    c = ctx("    blanks = r'[%s", "", ["        | -*(?=\\w)"], ["class Splitter:"])
    kept = "]' % re.escape(_blanks)\n    token_re = re.compile(r'''"
    raw = kept + "\n_indent_re = re.compile('(^[ \\t]*)(?:[^ \\t\\n])', re.MULTILINE)"
    assert process(raw, c, final=True).text == kept
    assert_stream_consistent(raw, c)
    raw = kept + "\n        ( # any whitespace\n          %(ws)s+"
    assert process(raw, c, final=True).text == raw
    # a string the user opened before the cursor holds text at any indentation
    raw = "\nsome text\nmore"
    assert process(raw, ctx("    x = '''", "", [], ["def f():"]), final=True).text == raw
    assert process("\n    x = '''\nsome text\nmore", ctx("def f():"), final=True).text == "\n    x = '''"


def test_a_blank_the_suggestion_pads_a_typed_bracket_with_stays_before_its_closer() -> None:
    # Neovim's lsp/util.lua after `({` was typed: the answer's own first blank shows the
    # line pads its braces, so the blank before the `}` already there stays
    c = ctx("  vim._with({", "}, function()", ["    return vim.lsp.buf"], ["local x"])
    for raw in (" buf = bufnr }, function()", " buf = bufnr "):
        assert process(raw, c, final=True).text == " buf = bufnr "
    # unpadded, a trailing blank is the model's and goes
    assert process("buf = bufnr ", c, final=True).text == "buf = bufnr"


def test_the_rest_of_a_docstring_line_repeated_is_cut() -> None:
    # a module docstring's last line: the line starts inside the string the lines above
    # opened, so its `"""` closes it, and the cut leaves the line as balanced as before
    above = ['"""Parsing helpers', "", "The parsers below read the format"]
    c = ctx("pass the byte order of the d", 'ow)."""', ["", "import os"], above)
    assert process('ata (0=little, 1=big endian, see below)."""', c, final=True).text == "ata (0=little, 1=big endian, see bel"
    assert_stream_consistent('ata (0=little, 1=big endian, see below)."""', c)
    # outside a string the same line's quote opens one, and a tail with its own `(` stays
    c = ctx("    f(", ')', ["    g()"])
    assert process("a, b)", c, final=True).text == "a, b"
    # a window that starts inside a docstring counts an odd number of quotes above a line
    # that has none: the line is read as code
    above = ["    of the string.", '    """', "    def f(value):"]
    c = ctx("        if isinstance(", "):", ["            pass"], above)
    assert process("value, (list, tuple)", c, final=True).text == "value, (list, tuple)"


def test_a_preprocessor_line_inside_a_block_comment_leaves_the_comment_text() -> None:
    # `#endif` at column 0 below a comment's indented text is no directive
    above = ["/* The table below is filled in by the caller", "   so that each entry"]
    c = ctx("   ", "", ["   is unused", "*/"], above)
    raw = "maps a code to its name.\n   Entries end with a null name.\n#endif"
    assert process(raw, c, final=True).text == "maps a code to its name.\n   Entries end with a null name."
    assert_stream_consistent(raw, c)
    # outside a comment a conditional at column 0 stays inside the block
    c = ctx("    x = 1;", "", ["}"], ["int f(void) {"])
    raw = "\n#ifdef DEBUG\n    log(x);\n#endif"
    assert process(raw, c, final=True).text == raw


def test_the_next_line_written_again_at_another_indentation_ends_the_suggestion() -> None:
    # a model that writes the line below the cursor again often gets its depth wrong: one
    # step deeper under the line that has it, back at column 0, or with a tab for spaces
    c = ctx("    total = ", "", ["    results.append(total)", "    return results"],
            ["def collect(items):", "    results = []"], tabstop=8)
    for raw in ("sum(items)\n        results.append(total)", "sum(items)\nresults.append(total)",
                "sum(items)\n\t    results.append(total)"):
        assert process(raw, c, final=True).text == "sum(items)"
        assert_stream_consistent(raw, c)
    # a closer, a keyword or a short statement recurs at every depth as another statement
    # where a line above it lets it be deeper: a block's header, an open bracket
    assert process("\n        c = 3", ctx("    if a:", "", ["    c = 3"]), final=True).text == "\n        c = 3"
    assert process("\n    end", ctx("  if x then", "", ["  end"]), final=True).text == "\n    end"
    assert process(" g(\n      end", ctx("  f(", "", ["  end"]), final=True).text == " g(\n      end"


def test_a_short_next_line_again_deeper_where_nothing_opens_a_block_ends_the_suggestion() -> None:
    # nothing on the cursor line or in the suggestion lets a line be deeper, so a short
    # line deeper than where it is below (`end`, `try:`, `---`, `c = 3`) is that line again
    cases = [
        (ctx("    a = 1", "", ["    c = 3"]), "\n        c = 3", ""),
        (ctx("  local t = { x }", "", ["  end"], ["  if y then"]), " -- t\n    end", " -- t"),
        (ctx("    self.a = a", "", ["    try:"]), "\n    self.b = b\n        try:", "\n    self.b = b"),
        (ctx("--- Returns the first item", "", ["---"]), ".\n    ---", "."),
    ]
    for c, raw, want in cases:
        assert process(raw, c, final=True).text == want
        assert_stream_consistent(raw, c)


def test_a_closer_the_line_has_and_then_its_rest_again_are_both_left_out() -> None:
    # two junk pieces at once on the cursor line: the `)` already after the cursor, then the
    # line's whole rest written again
    for prefix, suffix, raw, want in [
        ("    value = compute(", ") + offset", "args)) + offset", "args"),
        ("  for _, v in pairs(", ") do", "t)) do", "t"),
        ("    keys = [k for k in d[", "]]", "name]]]", "name"),
    ]:
        c = ctx(prefix, suffix)
        assert process(raw, c, final=True).text == want, (prefix, raw)
        assert_stream_consistent(raw, c)
    # a closer of a bracket the answer or the line still leaves open stays
    assert process("items)) + 1", ctx("n = max(len(", ") + 1"), final=True).text == "items)"
    assert process("items))", ctx("print(len(", ")"), final=True).text == "items)"


def test_a_long_line_without_words_written_again_deeper_ends_the_suggestion() -> None:
    # a comment's rule of `=` or `-` is the same line at any depth
    c = ctx("    return x", "", ["    # ---------------------------------", "    def g():"])
    raw = "\n        # ---------------------------------"
    assert process(raw, c, final=True).text == ""
    assert_stream_consistent(raw, c)


def test_brackets_of_a_c_preprocessor_directive_count_on_the_cursor_line() -> None:
    # in C a `#` line is a directive, not a comment: its closer after the cursor is there,
    # and a closer the answer writes again before the line's rest is left out
    for ft in ("c", "cpp"):
        assert process("4, 3))", ctx("#if __GNUC_PREREQ (", ")", filetype=ft), final=True).text == "4, 3"
        c = ctx("#  define twice(", ") ((x) * 2)", filetype=ft)
        assert process("x) ((x) * 2))", c, final=True).text == "x"
        assert_stream_consistent("x) ((x) * 2))", c)
