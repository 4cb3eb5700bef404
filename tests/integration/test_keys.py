"""Keys and accepts in a real headless Neovim, with keys typed ahead and replayed the ways a
user's editor does: one input holding several keys, a macro, `.` and `u`. The fallback of a
plugin key is compared with the same keys in a Neovim without the plugin's keys; accepts use
the real llama-server whose phrase model writes "run(a, b)\\n\\tok" at any spot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..conftest import PHRASE
from ..helpers import wait_for
from .nvim_session import lua, wait_ghost

pytestmark = pytest.mark.integration


@pytest.fixture()
def open_nvim(open_nvim: Callable[..., Any], tmp_path: Path) -> Callable[..., Any]:
    """conftest's open_nvim, with `lines` in a file of this test's and the phrase model asked
    through /infill (unless `setup` is false)."""

    def make(lines: list[str], *, url: str = "http://127.0.0.1:9", setup: bool = True,
             before: str = "", name: str = "sample.py", **opts: Any) -> Any:
        nv = open_nvim()
        if before:
            nv.exec_lua(before)
        if setup:
            nv.exec_lua("require('local_copilot').setup(...)", {
                "backends": {"llama.cpp": {"url": url, "endpoint": "infill"}}, "debounce_ms": 0,
                "adaptive_debounce": False, **opts})
        nv.command(f"edit {tmp_path / name}")
        nv.current.buffer[:] = lines
        return nv

    return make


def settled(nvim: Any) -> bool:
    mode = nvim.api.get_mode()
    return mode["mode"] == "n" and not mode["blocking"]


def run_keys(nvim: Any, keys: str, expected: list[str] | None = None) -> list[str]:
    """Send `keys` as one input (as a fast typist or a paste of keys does) and wait until
    Neovim is back in Normal mode with `expected` in the buffer (when given)."""
    nvim.input(keys)
    wait_for(lambda: settled(nvim), what="Normal mode")
    if expected is not None:
        try:
            wait_for(lambda: nvim.current.buffer[:] == expected, timeout=3)
        except AssertionError:
            assert nvim.current.buffer[:] == expected
    return nvim.current.buffer[:]


# Earlier mappings of the key the plugin falls back to: none at all, Neovim's own (its
# <Tab> is an <expr> callback jumping in a snippet), an <expr> string mapping, and one that
# must be mapped again (a <Plug> chain).
PREVIOUS = {
    "none": "vim.keymap.del('i', '<Tab>')",
    "neovim's own": "",
    "user expr": "vim.cmd([[inoremap <expr> <Tab> pumvisible() ? '<C-n>' : '<Tab>']])",
    "user remap": "vim.cmd([[inoremap <Plug>(my-tab) <Tab>]]) vim.cmd([[imap <Tab> <Plug>(my-tab)]])",
}


@pytest.mark.parametrize("previous", list(PREVIOUS))
def test_tab_fallback_with_keys_typed_ahead_and_from_a_macro(open_nvim: Any, previous: str) -> None:
    keys = "Am<Tab><Esc>"
    plain = open_nvim(["", "", ""], setup=False, before=PREVIOUS[previous], name="notes.txt")
    expected = run_keys(plain, keys)
    assert expected == ["m\t", "", ""]  # what the key does without the plugin
    nvim = open_nvim(["", "", ""], before=PREVIOUS[previous], name="notes.txt", keymaps={"accept": "<Tab>"},
                     auto_trigger=False)
    # nothing is shown: <Tab> falls back at its place among the keys, before the <Esc>
    run_keys(nvim, keys, expected)
    assert nvim.vvars["errmsg"] == ""
    # the same keys replayed from a register
    nvim.command("call cursor(2, 1)")
    nvim.command('let @a = "Am\\<Tab>\\<Esc>"')
    run_keys(nvim, "@a", ["m\t", "m\t", ""])
    # and recorded as typed, then replayed on the next line
    nvim.command("call cursor(3, 1)")
    run_keys(nvim, "qaAx<Tab>y<Esc>q", ["m\t", "m\t", "x\ty"])
    nvim.command("call cursor(1, 1)")
    run_keys(nvim, "@a", ["m\tx\ty", "m\t", "x\ty"])


def test_dismiss_fallback_is_the_plain_key(open_nvim: Any) -> None:
    # <C-]> in Insert mode expands an abbreviation; in Normal mode it jumps to a tag (E433
    # without a tags file): it must run where it was typed, before the <Esc>
    keys = "Ateh<C-]>m<Esc>"
    abbrev = "vim.cmd('iabbrev teh the')"
    plain = open_nvim([""], setup=False, before=abbrev)
    expected = run_keys(plain, keys)
    assert expected == ["them"]
    nvim = open_nvim([""], before=abbrev, keymaps={"dismiss": "<C-]>"}, auto_trigger=False)
    run_keys(nvim, keys, expected)
    assert nvim.vvars["errmsg"] == ""


def test_user_mapping_that_is_not_remapped_stays_so(open_nvim: Any) -> None:
    # the earlier mapping types <C-y>, which has a mapping of its own the earlier one never
    # reached (noremap); the plugin's fallback must not reach it either
    before = "vim.cmd([[inoremap <C-y> WRONG]]) vim.cmd([[inoremap <Tab> <C-y>]])"
    nvim = open_nvim(["ab", ""], before=before, keymaps={"accept": "<Tab>"}, auto_trigger=False)
    nvim.command("call cursor(2, 1)")
    run_keys(nvim, "A<Tab><Esc>", ["ab", "a"])  # <C-y>: the character above the cursor


def test_normal_mode_key_falls_back_in_place(open_nvim: Any) -> None:
    # next_edit_accept on J (join lines) with no next edit shown: J joins before the x runs
    keys = "Jx"
    plain = open_nvim(["ab", "cd"], setup=False)
    expected = run_keys(plain, keys)
    assert expected == ["abcd"]
    nvim = open_nvim(["ab", "cd"], keymaps={"next_edit_accept": "J"}, auto_trigger=False)
    run_keys(nvim, keys, expected)


def test_trigger_key_asks_from_its_mapping(open_nvim: Any, phrase_server: Any) -> None:
    nvim = open_nvim(["def f():", "\t"], url=phrase_server.url, keymaps={"trigger": "<C-t>"}, auto_trigger=False)
    nvim.command("call cursor(2, 1)")
    nvim.input("A<C-t>")
    assert wait_ghost(nvim, lambda t: t == PHRASE)
    assert nvim.vvars["errmsg"] == ""


@pytest.fixture()
def shown(open_nvim: Any, phrase_server: Any):
    """A Neovim with `keymaps`, at the end of line 2 of a Python file in Insert mode after
    typing `typed`, the phrase suggestion on screen."""

    def make(lines: list[str], typed: str = "q", **opts: Any) -> Any:
        nvim = open_nvim(lines, url=phrase_server.url, **opts)
        nvim.command("call cursor(2, 1)")
        nvim.input("A" + typed)
        wait_ghost(nvim, lambda t: t == PHRASE)
        return nvim

    return make


def test_dot_repeats_the_typed_and_the_accepted_text(shown: Any) -> None:
    nvim = shown(["def f():", "\t", "def g():", "\tpass"], keymaps={"accept": "<Tab>"})
    # options that would change typed text: auto-wrap, comment leaders, autoindent
    nvim.command("setlocal textwidth=8 formatoptions+=tcro autoindent")
    run_keys(nvim, "<Tab><Esc>", ["def f():", "\tqrun(a, b)", "\tok", "def g():", "\tpass"])
    assert tuple(nvim.current.window.cursor) == (3, 2)
    assert lua(nvim, "vim.bo.textwidth") == 8 and "r" in lua(nvim, "vim.bo.formatoptions")
    nvim.command("call cursor(5, 1)")
    # `.` repeats the whole insert: what was typed and what was accepted, exactly (it types
    # the text again: auto-wrap would apply as to any repeated insert)
    nvim.command("setlocal textwidth=0")
    run_keys(nvim, ".", ["def f():", "\tqrun(a, b)", "\tok", "def g():", "\tpassqrun(a, b)", "\tok"])
    # `o` (open a line), a key typed and an accept; `.` on the last line opens one below it
    # with the same text (its indent is the autoindent of where it opens, as `o`'s always is)
    nvim.command("call cursor(1, 1)")
    nvim.input("o")
    wait_for(lambda: nvim.api.get_mode()["mode"] == "i")
    nvim.input("z")
    wait_ghost(nvim)
    # the whole suggestion: a first part is drawn first, and Tab takes what is on screen then
    wait_for(lambda: lua(nvim, "(function() local g = require('local_copilot.ghost').current; "
                               "return g ~= nil and g.final end)()"), what="the whole suggestion")
    shown_text = lua(nvim, "require('local_copilot.ghost').text()")
    before = nvim.current.buffer[:]
    after = run_keys(nvim, "<Tab><Esc>")
    inserted = after[1:len(after) - len(before) + 2]
    assert "\n".join(inserted).lstrip() == "z" + shown_text
    nvim.command(f"call cursor({len(after)}, 1)")
    again = run_keys(nvim, ".")[len(after):]
    assert [again[0].lstrip()] + again[1:] == [inserted[0].lstrip()] + inserted[1:]


def test_one_undo_removes_one_accept(shown: Any) -> None:
    # typed "q", accepted, typed "z": three undo steps, the accept exactly one of them (it
    # was one with the "z" typed after it)
    nvim = shown(["def f():", "\t"], keymaps={"accept": "<Tab>"})
    run_keys(nvim, "<Tab>z<Esc>", ["def f():", "\tqrun(a, b)", "\tokz"])
    run_keys(nvim, "u", ["def f():", "\tqrun(a, b)", "\tok"])
    run_keys(nvim, "u", ["def f():", "\tq"])  # the accept, and only it
    run_keys(nvim, "u", ["def f():", "\t"])  # then what was typed before it
    run_keys(nvim, "<C-r>", ["def f():", "\tq"])
    run_keys(nvim, "<C-r>", ["def f():", "\tqrun(a, b)", "\tok"])


def test_partial_accepts_are_repeated_and_undone_one_at_a_time(shown: Any) -> None:
    nvim = shown(["def f():", "\t", "\t"], keymaps={"accept_word": "<C-l>", "accept_line": "<C-j>"})
    nvim.input("<C-l>")
    assert wait_ghost(nvim, lambda t: t == "(a, b)\n\tok")  # the rest stays shown
    nvim.input("<C-l>")
    assert wait_ghost(nvim, lambda t: t == "a, b)\n\tok")
    run_keys(nvim, "<Esc>", ["def f():", "\tqrun(", "\t"])
    run_keys(nvim, "u", ["def f():", "\tqrun", "\t"])  # one word per undo step
    run_keys(nvim, "<C-r>", ["def f():", "\tqrun(", "\t"])
    nvim.command("call cursor(3, 1)")
    run_keys(nvim, ".", ["def f():", "\tqrun(", "\tqrun("])
    # accept_line: the line and its line break; `.` repeats both
    nvim = shown(["def f():", "\t", "\t"], typed="", keymaps={"accept_line": "<C-j>"})
    run_keys(nvim, "<C-j><Esc>", ["def f():", "\trun(a, b)", "", "\t"])
    nvim.command("call cursor(4, 1)")
    run_keys(nvim, ".", ["def f():", "\trun(a, b)", "", "\trun(a, b)", ""])


def test_accept_from_the_readme_expr_mapping_keeps_its_place_among_typed_keys(shown: Any) -> None:
    before = ("vim.keymap.set('i', '<Tab>', function()\n"
              "  if not require('local_copilot').accept() then return '<Tab>' end\n"
              "end, { expr = true })")
    nvim = shown(["def f():", "\t"], before=before)
    # <Tab> and the keys after it in one input: the accepted text comes before the "z"
    run_keys(nvim, "<Tab>z<Esc>", ["def f():", "\tqrun(a, b)", "\tokz"])
    run_keys(nvim, "u", ["def f():", "\tqrun(a, b)", "\tok"])
    run_keys(nvim, "u", ["def f():", "\tq"])
    # nothing shown: the mapping's own fallback
    nvim.command("call cursor(2, 1)")
    lua(nvim, "require('local_copilot').disable()")
    nvim.command("setlocal noexpandtab softtabstop=0")
    run_keys(nvim, "A<Tab>x<Esc>", ["def f():", "\tq\tx"])


@pytest.mark.parametrize("how", ["plug", "callback", "cmd"])
def test_accept_from_plug_and_callback_mappings(shown: Any, how: str) -> None:
    mapping = {
        "plug": "vim.keymap.set('i', '<C-a>', '<Plug>(local-copilot-accept)')",
        "callback": "vim.keymap.set('i', '<C-a>', function() vim.g.ok = require('local_copilot').accept() end)",
        "cmd": "vim.keymap.set('i', '<C-a>', '<Cmd>lua vim.g.ok = require(\"local_copilot\").accept()<CR>')",
    }[how]
    nvim = shown(["def f():", "\t"], before=mapping)
    run_keys(nvim, "<C-a>z<Esc>", ["def f():", "\tqrun(a, b)", "\tokz"])
    if how != "plug":
        assert nvim.vars["ok"] is True
    nvim.command("call cursor(2, 1)")
    run_keys(nvim, "j.", ["def f():", "\tqrun(a, b)", "\tokzqrun(a, b)", "\tokz"])


def test_accept_returns_false_while_its_text_waits_to_be_typed(shown: Any) -> None:
    # two accepts in one call: the second finds the first one's text not typed yet
    nvim = shown(["def f():", "\t"])
    assert lua(nvim, "{ require('local_copilot').accept(), require('local_copilot').accept() }") == [True, False]
    run_keys(nvim, "<Esc>", ["def f():", "\tqrun(a, b)", "\tok"])
    assert lua(nvim, "vim.o.eventignore") == ""


AWKWARD = "a<b>\\|x0^ \u00c0\u20ac\t\U0001F600 123 teh \x01\n\t  # c: d\n}\nend 0\n\nelse:0"


def test_any_text_lands_and_repeats_exactly(open_nvim: Any) -> None:
    # keys' names, backslashes, digits after CTRL-V, a UTF-8 byte 0x80 (À), a control
    # character, an abbreviation, comment leaders, a closing brace and `else:` under cindent,
    # lines longer than 'textwidth': shown the way the host shows a suggestion, then accepted
    nvim = open_nvim([""], keymaps={"accept": "<Tab>"}, auto_trigger=False)
    nvim.command("setlocal autoindent textwidth=10 formatoptions+=tcro cindent")
    nvim.command("iabbrev teh the")
    nvim.input("i")
    wait_for(lambda: nvim.api.get_mode()["mode"] == "i")
    nvim.exec_lua("""
        local g = require('local_copilot.ghost')
        local buf = vim.api.nvim_get_current_buf()
        g.expect(buf, 1)
        g.show({ seq = 1, buf = buf, row = 0, col = 0, tick = vim.api.nvim_buf_get_changedtick(buf),
                 items = { { text = ..., words = {} } }, index = 0, final = true })""", AWKWARD)
    assert wait_ghost(nvim) == AWKWARD
    lines = AWKWARD.split("\n")
    run_keys(nvim, "<Tab><Esc>", lines)
    assert (lua(nvim, "vim.bo.textwidth"), lua(nvim, "vim.bo.cindent"), lua(nvim, "vim.o.eventignore")) == (10, True, "")
    nvim.command("setlocal textwidth=0")
    nvim.command("$put _")
    nvim.command(f"call cursor({len(lines) + 1}, 1)")
    run_keys(nvim, ".", lines + lines)
