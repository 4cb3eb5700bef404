"""The enclosing scope's headers kept above a cut window (prompt/scope.py), and the window
fitter putting them into the prompt."""

from __future__ import annotations

import textwrap

from local_copilot.prompt.budget import TokenEstimator
from local_copilot.prompt.scope import enclosing_headers, scope_start
from local_copilot.prompt.window import WindowFitter
from local_copilot.snapshot import Snapshot


def _lines(text: str) -> list[str]:
    return textwrap.dedent(text).strip("\n").split("\n")


def _cut_at(lines: list[str], marker: str) -> int:
    return next(i for i, line in enumerate(lines) if marker in line)


def test_a_method_body_cut_keeps_its_class_and_def_lines() -> None:
    lines = _lines('''
        import os

        class Store:
            """Keeps things."""

            def __init__(self, root):
                self.root = root

            def put(self, key, value, *, replace=False):
                path = os.path.join(self.root, key)
                if os.path.exists(path) and not replace:
                    raise KeyError(key)
                with open(path, "w") as f:
                    f.write(value)
    ''')
    start = _cut_at(lines, "if os.path.exists")
    assert enclosing_headers(lines[:-1], start) == ("class Store:", "    def put(self, key, value, *, replace=False):")


def test_a_signature_over_several_lines_is_kept_whole() -> None:
    lines = _lines('''
        def scale_points(
            points: list[tuple[float, float]],
            factor: float,
            *,
            origin: tuple[float, float] = (0.0, 0.0),
        ) -> list[tuple[float, float]]:
            ox, oy = origin
            out = []
            for x, y in points:
                out.append((ox + (x - ox) * factor, oy + (y - oy) * factor))
            return out
    ''')
    start = _cut_at(lines, "out = []")
    assert enclosing_headers(lines[:-1], start) == tuple(lines[:6])


def test_closed_sibling_blocks_and_comments_are_passed_over_in_c() -> None:
    lines = _lines('''
        static int parse(const char *s, struct opts *o)
        {
            if (!s) {
                return -1;
            }
            // the rest
            while (*s) {
                if (*s == '-') {
                    o->neg = 1;
                }
                s++;
            }
            return 0;
        }
    ''')
    start = _cut_at(lines, "o->neg = 1")
    above_cursor = lines[:start + 1]  # the window: the lines above the cursor's
    assert enclosing_headers(above_cursor, start) == (
        "static int parse(const char *s, struct opts *o)", "{", "    while (*s) {", "        if (*s == '-') {")


def test_lua_end_lines_close_siblings() -> None:
    lines = _lines('''
        local M = {}

        function M.setup(opts)
          for k, v in pairs(opts) do
            M[k] = v
          end
          if opts.keymaps then
            vim.keymap.set('i', opts.keymaps.accept, M.accept)
          end
        end
    ''')
    start = _cut_at(lines, "vim.keymap.set")
    assert enclosing_headers(lines[:start + 1], start) == ("function M.setup(opts)", "  if opts.keymaps then")


def test_the_headers_are_those_of_the_windows_first_line_whatever_follows() -> None:
    # the window starts nested and then leaves the nested blocks: the headers stay those of
    # its start (they depend on the start alone, so the prompt's start stays while it does)
    lines = _lines('''
        def below_zero(operations):
            balance = 0
            for op in operations:
                balance += op
                if balance < 0:
                    return True
            return False

        def next_one():
    ''')
    start = _cut_at(lines, "return True")
    headers = ("def below_zero(operations):", "    for op in operations:", "        if balance < 0:")
    assert enclosing_headers(lines[:-1], start) == headers
    assert enclosing_headers(lines, start) == headers


def test_nothing_when_the_window_reaches_the_left_margin_or_nothing_is_above() -> None:
    lines = _lines('''
        def f():
            return 1

        x = f()
    ''')
    assert enclosing_headers(lines, _cut_at(lines, "return 1") + 1) == ()  # a blank, then x = f()
    assert enclosing_headers(lines, 0) == ()
    assert enclosing_headers(["    a", "", "    b"], 1) == ()  # nothing indented less above


def test_tabs_count_to_the_tabstop() -> None:
    lines = ["func main() {", "\tfor {", "\t\tx++", "\t\ty++", "\t}", "}"]
    assert enclosing_headers(lines[:4], 3, tabstop=4) == ("func main() {", "\tfor {")


def test_the_fitted_prompt_keeps_the_headers_of_a_cut_window() -> None:
    body = [f"        total += item.price * {i}" for i in range(300)]
    lines = ["import math", "", "class Cart:", "    def total(self):", "        total = 0", *body,
             "        return total", ""]
    row = len(lines) - 2
    snap = Snapshot(buf=1, tick=1, row=row, col=8, first=0, lines=lines, ts=8, path="/p/cart.py")
    est = TokenEstimator()
    fitted = WindowFitter().fit(snap, lines_before=400, lines_after=10, budget=200, est=est, prefix_share=0.75)
    ctx = fitted.ctx
    assert ctx.prefix.startswith("class Cart:\n    def total(self):\n        total += item.price")
    # the kept window is what the post-processor sees as the lines above; the headers are prompt only
    assert "class Cart:" not in ctx.prev_lines
    assert fitted.tokens == est.tokens(ctx.prefix + ctx.middle + ctx.suffix)
    whole = WindowFitter().fit(snap, lines_before=400, lines_after=10, budget=None, est=est, prefix_share=0.75)
    assert whole.ctx.prefix.count("class Cart:") == 1  # nothing cut: nothing added


def test_a_window_starting_just_below_its_header_starts_at_the_header() -> None:
    # the prompt then reads on from the header without a gap, a run of what a window starting
    # further up held (the server's cached prompt keeps it)
    lines = ["class A:", "    def f(self):", "        a = 1", *[f"        b{i} = {i}" for i in range(20)]]
    headers, start = scope_start(lines, 3)  # one line (a = 1) below `def f`
    assert (headers, start) == (("class A:",), 1)
    far = ["class A:", "    def f(self):", *[f"        b{i} = {i}" for i in range(40)]]
    headers, start = scope_start(far, 30)  # deep in the body: the headers, then the window
    assert (headers, start) == (("class A:", "    def f(self):"), 30)
