"""Editor experience in a real headless Neovim against the real llama-server, with a UI
attached where the screen matters. The phrase model writes "run(a, b)\\n\\tok" at any spot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..conftest import PHRASE
from ..helpers import wait_for
from .nvim_session import attach_ui, buffer_text, extmarks, ghost_text, lua, screen_lines, wait_ghost

pytestmark = pytest.mark.integration


@pytest.fixture()
def open_nvim(open_nvim: Callable[..., Any], tmp_path: Path) -> Callable[..., Any]:
    """conftest's open_nvim, with `lines` in a file of this test's and a UI attached if `ui`."""

    def make(url: str, lines: list[str], *, name: str = "sample.py", ui: bool = False, **opts: Any) -> Any:
        # /infill: the phrase model writes PHRASE after the middle marker, and /infill ends the
        # prompt there whatever the line holds; with the default /completion the typed text
        # comes last and this bigram model would continue that text instead (the default
        # prompt is tested in test_three_backends.py and test_ghost_e2e.py)
        setup = {"backends": {"llama.cpp": {"url": url, "endpoint": "infill"}}, "debounce_ms": 0,
                 "adaptive_debounce": False, **opts}
        nv = open_nvim(setup)
        if ui:
            attach_ui(nv)
        nv.command(f"edit {tmp_path / name}")
        nv.current.buffer[:] = lines
        return nv

    return make


def counters(nvim: Any) -> dict[str, int]:
    return nvim.call("LocalCopilotCall", "status")["stats"]["counters"]


def at_end_of(nvim: Any, row: int) -> None:
    nvim.command(f"call cursor({row}, 1)")
    nvim.input("A")


def test_accept_word_inserts_one_word_and_keeps_the_rest_shown(open_nvim: Any, phrase_server: Any) -> None:
    nvim = open_nvim(phrase_server.url, ["def f():", "\t"])
    at_end_of(nvim, 2)
    assert wait_ghost(nvim, lambda t: t == PHRASE) == PHRASE
    assert lua(nvim, "require('local_copilot').accept_word()") is True
    wait_for(lambda: nvim.current.buffer[1] == "\trun", what="first word inserted")
    assert wait_ghost(nvim, lambda t: t == "(a, b)\n\tok")
    assert tuple(nvim.current.window.cursor) == (2, len("\trun"))
    lua(nvim, "require('local_copilot').accept_word()")
    wait_for(lambda: nvim.current.buffer[1] == "\trun(", what="second word")
    assert wait_ghost(nvim, lambda t: t == "a, b)\n\tok")


def test_accept_line_takes_one_line_at_a_time(open_nvim: Any, phrase_server: Any) -> None:
    nvim = open_nvim(phrase_server.url, ["def f():", "\t"])
    at_end_of(nvim, 2)
    wait_ghost(nvim, lambda t: t == PHRASE)
    assert lua(nvim, "require('local_copilot').accept_line()") is True
    wait_for(lambda: nvim.current.buffer[:] == ["def f():", "\trun(a, b)", ""], what="first line")
    assert tuple(nvim.current.window.cursor) == (3, 0)
    assert wait_ghost(nvim, lambda t: t == "\tok")
    lua(nvim, "require('local_copilot').accept_line()")
    wait_for(lambda: nvim.current.buffer[:] == ["def f():", "\trun(a, b)", "\tok"], what="second line")
    assert tuple(nvim.current.window.cursor) == (3, len("\tok"))


def test_accept_with_text_after_the_cursor_does_not_duplicate_it(open_nvim: Any, phrase_server: Any) -> None:
    nvim = open_nvim(phrase_server.url, ["def f():", "\tx = ()"])
    nvim.command("call cursor(2, 7)")  # on the ")": insert between the autopaired brackets
    nvim.input("i")
    # mid-line: one line only; the existing ")" closes the outer bracket
    assert wait_ghost(nvim, lambda t: t == "run(a, b)")
    lua(nvim, "require('local_copilot').accept()")
    wait_for(lambda: nvim.current.buffer[1] == "\tx = (run(a, b))", what="accepted mid-line")
    assert tuple(nvim.current.window.cursor) == (2, len("\tx = (run(a, b)"))


def test_shown_suggestions_are_counted_without_a_message_each(open_nvim: Any, phrase_server: Any) -> None:
    # a message per suggestion woke the host only to count it: the count rides along with the
    # next request, or the host asks Lua for it when its stats are read
    nvim = open_nvim(phrase_server.url, ["def f():", "\t"])
    nvim.exec_lua("""
        local host = require('local_copilot.host')
        local emit = host.emit
        _G.EVENTS = {}
        host.emit = function(name, payload)
          table.insert(_G.EVENTS, { name = name, shown = type(payload) == 'table' and payload.shown or 0 })
          return emit(name, payload)
        end""")
    final = "require('local_copilot.ghost').current ~= nil and require('local_copilot.ghost').current.final == true"
    at_end_of(nvim, 2)
    assert wait_ghost(nvim, lambda t: t == PHRASE)
    wait_for(lambda: lua(nvim, final), what="a final suggestion")
    nvim.input("z")  # not what is shown: a new request, which carries the count
    wait_for(lambda: any(e["shown"] == 1 for e in lua(nvim, "_G.EVENTS")), what="the count sent with the request")
    wait_for(lambda: lua(nvim, final) and nvim.current.buffer[1] == "\tz", what="the next final suggestion")
    # the second one is not sent yet: the stats ask for it
    wait_for(lambda: counters(nvim).get("shown", 0) == 2, what="both counted")
    assert "shown" not in [e["name"] for e in lua(nvim, "_G.EVENTS")]


def test_typing_what_is_shown_trims_it_without_a_request(open_nvim: Any, phrase_server: Any) -> None:
    nvim = open_nvim(phrase_server.url, ["def f():", "\t"])
    at_end_of(nvim, 2)
    wait_ghost(nvim, lambda t: t == PHRASE)
    wait_for(lambda: counters(nvim).get("shown", 0) >= 1)
    before = counters(nvim)
    nvim.input("r")
    assert wait_ghost(nvim, lambda t: t == "un(a, b)\n\tok")
    nvim.input("u")
    assert wait_ghost(nvim, lambda t: t == "n(a, b)\n\tok")
    marks = extmarks(nvim)
    assert (marks[0][1], marks[0][2]) == (1, len("\tru"))
    wait_for(lambda: counters(nvim).get("typed_through", 0) >= before.get("typed_through", 0) + 2)
    after = counters(nvim)
    assert after.get("requests", 0) == before.get("requests", 0)
    assert after.get("cache_hits", 0) == before.get("cache_hits", 0)


def test_tab_falls_back_to_the_users_mapping_and_the_completion_menu(open_nvim: Any, phrase_server: Any) -> None:
    nvim = open_nvim(phrase_server.url, ["alpha = 1", "alphabet = 2", "x = "], ui=True)  # the menu needs a UI
    # the user's own <Tab>: select the next completion item when the menu is open
    nvim.command('inoremap <expr> <Tab> pumvisible() ? "\\<C-n>" : "TAB!"')
    nvim.exec_lua("require('local_copilot').setup(...)", {
        "backends": {"llama.cpp": {"url": phrase_server.url, "endpoint": "infill"}}, "debounce_ms": 0, "adaptive_debounce": False,
        "keymaps": {"accept": "<Tab>"},
    })
    nvim.command("set completeopt=menu,menuone,noinsert,noselect")
    at_end_of(nvim, 3)
    # a Python buffer ('expandtab', 'shiftwidth' 4: its ftplugin) with no indented line: the
    # model's tab is one indentation level, written in spaces (indentation.py)
    assert nvim.exec_lua("return { vim.bo.expandtab, vim.bo.shiftwidth }") == [True, 4]
    assert wait_ghost(nvim, lambda t: t == "run(a, b)\n    ok")
    # the built-in menu opens: the suggestion hides under it, <Tab> goes to the user's mapping
    nvim.input("<C-r>=complete(5, ['alpha', 'alphabet']) ? '' : ''<CR>")
    wait_for(lambda: nvim.call("pumvisible") == 1, what="completion menu")
    wait_for(lambda: not extmarks(nvim), what="suggestion hidden under the menu")
    nvim.input("<Tab>")
    wait_for(lambda: nvim.current.buffer[2] == "x = alpha", what="user's <Tab> selected an item")
    nvim.input("<C-e>")  # close the menu, restoring the typed text
    wait_for(lambda: nvim.call("pumvisible") == 0)
    wait_for(lambda: nvim.current.buffer[2] == "x = ")
    # nothing is shown for the new text yet or the request gives it back; either way <Tab>
    # accepts when shown and otherwise types the user's fallback
    text = wait_ghost(nvim, lambda t: t == "run(a, b)\n    ok")
    assert text
    nvim.input("<Tab>")
    wait_for(lambda: nvim.current.buffer[2:] == ["x = run(a, b)", "    ok"], what="<Tab> accepted")
    lua(nvim, "require('local_copilot').disable()")
    nvim.input("<Tab>")
    wait_for(lambda: nvim.current.buffer[3] == "    okTAB!", what="fallback with nothing shown")
    assert nvim.call("maparg", "<Tab>", "i") != ""  # a mapping remains; none was removed


def test_setup_again_rebinds_and_gives_keys_back(open_nvim: Any, phrase_server: Any) -> None:
    nvim = open_nvim(phrase_server.url, ["def f():", "\t"], keymaps={"accept": "<Tab>"})
    nvim.command("inoremap <C-j> USERJ")  # the user's own mapping of the key accept moves to

    def setup(keymaps: dict[str, Any]) -> None:
        nvim.exec_lua("require('local_copilot').setup(...)", {
            "backends": {"llama.cpp": {"url": phrase_server.url, "endpoint": "infill"}}, "keymaps": keymaps})

    def desc(lhs: str) -> str:
        return nvim.call("maparg", lhs, "i", False, True).get("desc", "")

    assert desc("<Tab>") == "local-copilot: accept (falls back to the key)"
    setup({"accept": "<C-j>"})  # accept moves: <Tab> does what it did before (Neovim's own
    assert not desc("<Tab>").startswith("local-copilot")  # snippet-jump mapping), <C-j> accepts
    assert desc("<C-j>") == "local-copilot: accept (falls back to the key)"
    at_end_of(nvim, 2)
    assert wait_ghost(nvim, lambda t: t == PHRASE)
    nvim.input("<C-j>")
    wait_for(lambda: nvim.current.buffer[1:] == ["\trun(a, b)", "\tok"], what="<C-j> accepted")
    setup({"accept": False})  # no keys: <C-j> does what the user mapped it to
    assert nvim.call("maparg", "<C-j>", "i") == "USERJ"
    nvim.input("<C-j>")
    wait_for(lambda: nvim.current.buffer[2] == "\tokUSERJ", what="the user's <C-j>")


def test_next_and_prev_fetch_and_cycle_alternatives(open_nvim: Any, branch_server: Any) -> None:
    nvim = open_nvim(branch_server.url, ["def f():", "\t"], ui=True)
    at_end_of(nvim, 2)
    first = wait_ghost(nvim, lambda t: t in (PHRASE, "zq"))
    assert lua(nvim, "require('local_copilot').next()") is True
    other = {PHRASE: "zq", "zq": PHRASE}[first]
    shown = wait_ghost(nvim, lambda t: t.startswith(other), timeout=30)
    items = nvim.exec_lua("return vim.tbl_map(function(i) return i.text end, require('local_copilot.ghost').current.items)")
    assert "(2/2)" in shown or any("(2/2)" in ln for ln in screen_lines(nvim)), items
    assert lua(nvim, "require('local_copilot').status()") == "showing 2/2"
    assert lua(nvim, "require('local_copilot').prev()") is True
    wait_ghost(nvim, lambda t: t.startswith(first))
    lua(nvim, "require('local_copilot').accept()")
    wait_for(lambda: nvim.current.buffer[1:] == ["\t" + first.split("\n")[0]] + first.split("\n")[1:])


def test_dismiss_and_manual_trigger(open_nvim: Any, phrase_server: Any) -> None:
    nvim = open_nvim(phrase_server.url, ["def f():", "\t"], auto_trigger=False)
    at_end_of(nvim, 2)
    nvim.input("pass ")
    wait_for(lambda: nvim.current.buffer[1] == "\tpass ", what="the typing")
    # with debounce_ms = 0 a keystroke's request goes from a vim.schedule callback: one queued
    # after the keys has run once these have, so a request auto_trigger let through is out
    # (the host started, status 'waiting' or a suggestion) by the time this one has run
    nvim.exec_lua("vim.g.lc_flushed = false; vim.schedule(function() vim.g.lc_flushed = true end)")
    wait_for(lambda: nvim.vars["lc_flushed"], what="the keystrokes' scheduled callbacks")
    assert lua(nvim, "require('local_copilot').status()") == "idle"
    assert ghost_text(nvim) is None and counters_or_empty(nvim).get("requests", 0) == 0
    nvim.input("<Plug>(local-copilot-trigger)")
    assert wait_ghost(nvim, lambda t: t == PHRASE)
    assert counters(nvim)["requests"] == 1  # the trigger's, and none of the five keys
    assert lua(nvim, "require('local_copilot').dismiss()") is True
    assert ghost_text(nvim) is None
    assert lua(nvim, "require('local_copilot').dismiss()") is False
    assert buffer_text(nvim) == "def f():\n\tpass "


def counters_or_empty(nvim: Any) -> dict[str, int]:
    return counters(nvim) if nvim.exec_lua("return vim.fn.exists('*LocalCopilotCall')") else {}


def test_screen_shows_tab_cjk_and_multiline_suggestions(open_nvim: Any, phrase_server: Any) -> None:
    nvim = open_nvim(phrase_server.url, ["def f():", "\t名前 = 🙂"], ui=True)
    nvim.command("set noexpandtab tabstop=8")
    at_end_of(nvim, 2)
    nvim.input(" + ")
    wait_ghost(nvim, lambda t: t == PHRASE)
    screen = screen_lines(nvim)
    assert screen[0] == "def f():"
    assert screen[1] == " " * 8 + "名前 = 🙂 + run(a, b)"  # the tab, wide characters, then the ghost
    assert screen[2] == " " * 8 + "ok"  # the virtual line's tab expands like buffer text
    assert buffer_text(nvim) == "def f():\n\t名前 = 🙂 + "  # nothing inserted
    lua(nvim, "require('local_copilot').accept()")
    wait_for(lambda: nvim.current.buffer[:] == ["def f():", "\t名前 = 🙂 + run(a, b)", "\tok"])
    # the accepted tab is real text now; the next suggestion (prefetched) may follow it
    assert screen_lines(nvim)[2].startswith(" " * 8 + "ok")


def test_cleared_on_leave_buffer_switch_and_changes_underneath(open_nvim: Any, phrase_server: Any, tmp_path: Path) -> None:
    nvim = open_nvim(phrase_server.url, ["def f():", "\t", "", "tail"])
    at_end_of(nvim, 2)
    wait_ghost(nvim, lambda t: t == PHRASE)
    nvim.api.buf_set_lines(0, 3, 4, True, ["changed underneath"])
    # what is drawn always belongs to the buffer as it is now, never to the old text
    fresh = "local g = require('local_copilot.ghost').current\n" \
            "return g == nil or g.tick == vim.api.nvim_buf_get_changedtick(0)"
    wait_for(lambda: nvim.exec_lua(fresh), what="stale suggestion gone")
    wait_ghost(nvim, lambda t: t == PHRASE)  # a fresh request answers for the new text
    nvim.input("<Esc>")
    wait_for(lambda: not extmarks(nvim), what="cleared on InsertLeave")
    at_end_of(nvim, 2)
    wait_ghost(nvim)
    nvim.command(f"noautocmd stopinsert | edit {tmp_path / 'other.py'}")
    wait_for(lambda: not nvim.exec_lua("return #vim.api.nvim_buf_get_extmarks(vim.fn.bufnr('#'), vim.api.nvim_create_namespace('local_copilot'), 0, -1, {})") , what="cleared on buffer switch")


def test_enable_disable_filetypes_buffers_and_secret_files(open_nvim: Any, phrase_server: Any, tmp_path: Path) -> None:
    nvim = open_nvim(phrase_server.url, ["x = "], filetypes={"python": False})
    assert lua(nvim, "require('local_copilot').status()") == "disabled"
    lua(nvim, "require('local_copilot').setup({ backends = { ['llama.cpp'] = { url = '%s', endpoint = 'infill' } }, debounce_ms = 0 })" % phrase_server.url)
    nvim.command("let b:local_copilot_enabled = v:false")
    assert lua(nvim, "require('local_copilot').status()") == "disabled"
    nvim.command("unlet b:local_copilot_enabled")
    assert lua(nvim, "require('local_copilot').status()") == "idle"
    nvim.command("LocalCopilot disable")
    assert lua(nvim, "require('local_copilot').status()") == "disabled"
    nvim.command("LocalCopilot toggle")
    assert lua(nvim, "require('local_copilot').status()") == "idle"
    for name in (".env", "server.pem", "id_rsa", "credentials.json", ".netrc", "deploy.key"):
        nvim.command(f"edit {tmp_path / name}")
        nvim.command("let b:local_copilot_enabled = v:true")  # secrets stay off even so
        # before the host has started: Lua's copy of the built-in rules says why
        assert lua(nvim, "require('local_copilot').status()").startswith("disabled: a secret file ("), name


def test_status_reports_backend_down_once(open_nvim: Any) -> None:
    nvim = open_nvim("http://127.0.0.1:9", ["x = "])
    at_end_of(nvim, 1)
    nvim.input("1")
    wait_for(lambda: lua(nvim, "require('local_copilot').status()") == "backend down", what="backend down")
    nvim.input("2")
    nvim.input("3")
    messages = wait_for(lambda: nvim.exec_lua("return vim.fn.execute('messages')").strip(), what="a notification")
    assert messages.count("cannot reach") == 1, messages
    assert "Traceback" not in messages and "Error" not in messages.split("cannot reach")[0]


def test_status_says_bad_option_until_good_options_come(open_nvim: Any, phrase_server: Any) -> None:
    """Options the host rejects: it drops every snapshot, so the status line must not say
    'waiting' (it did, for good); :LocalCopilot status names no backend instead of vim.NIL.
    Good options from setup() bring suggestions and the plain states back."""
    nvim = open_nvim(phrase_server.url, ["def f():", "\t"], n_predict="many")
    at_end_of(nvim, 2)
    nvim.input("x")
    wait_for(lambda: lua(nvim, "require('local_copilot').status()") == "bad option", what="the bad option status")
    seq = "require('local_copilot.sessions').get(vim.api.nvim_get_current_buf()).seq or 0"
    before = lua(nvim, seq)
    nvim.input("y")
    wait_for(lambda: buffer_text(nvim) == "def f():\n\txy", what="the key typed")
    assert lua(nvim, seq) == before  # nothing is asked for: the host would drop it
    assert lua(nvim, "require('local_copilot').status()") == "bad option"
    nvim.command("LocalCopilot status")
    shown = nvim.exec_lua("return vim.fn.execute('messages')")
    assert "local-copilot: bad option" in shown and "backend: none" in shown, shown
    assert "vim.NIL" not in shown and "Traceback" not in shown, shown
    assert buffer_text(nvim) == "def f():\n\txy"  # nothing inserted meanwhile

    nvim.exec_lua("require('local_copilot').setup(...)", {
        "backends": {"llama.cpp": {"url": phrase_server.url, "endpoint": "infill"}}, "debounce_ms": 0,
        "adaptive_debounce": False})
    nvim.input("<BS>")
    wait_ghost(nvim, lambda t: t == PHRASE)
    assert lua(nvim, "require('local_copilot').status()") == "showing 1/1"


def test_user_events_fire_on_suggestion_and_accept(open_nvim: Any, phrase_server: Any) -> None:
    nvim = open_nvim(phrase_server.url, ["def f():", "\t"])
    nvim.exec_lua(
        "vim.g.events = {}\n"
        "for _, p in ipairs({ 'LocalCopilotSuggestion', 'LocalCopilotAccept' }) do\n"
        "  vim.api.nvim_create_autocmd('User', { pattern = p, callback = function(ev)\n"
        "    local e = vim.g.events; e[#e + 1] = p .. ':' .. ev.data.text; vim.g.events = e end })\n"
        "end"
    )
    at_end_of(nvim, 2)
    wait_ghost(nvim, lambda t: t == PHRASE)
    wait_for(lambda: nvim.vars["events"], what="LocalCopilotSuggestion")
    lua(nvim, "require('local_copilot').accept()")
    wait_for(lambda: f"LocalCopilotAccept:{PHRASE}" in nvim.vars["events"])
    assert nvim.vars["events"][0] == f"LocalCopilotSuggestion:{PHRASE}"


def test_works_in_several_windows_and_tabs(open_nvim: Any, phrase_server: Any, tmp_path: Path) -> None:
    nvim = open_nvim(phrase_server.url, ["def f():", "\t"])
    nvim.command(f"vsplit {tmp_path / 'two.py'}")
    nvim.current.buffer[:] = ["def g():", "\t"]
    at_end_of(nvim, 2)
    wait_ghost(nvim, lambda t: t == PHRASE)
    nvim.input("<Esc>")
    nvim.command("wincmd p")  # back to the first window: its suggestion is its own
    wait_for(lambda: not extmarks(nvim), what="nothing left in the other window's buffer")
    at_end_of(nvim, 2)
    wait_ghost(nvim, lambda t: t == PHRASE)
    nvim.input("<Esc>")
    nvim.command(f"tabnew {tmp_path / 'three.py'}")
    nvim.current.buffer[:] = ["def h():", "\t"]
    at_end_of(nvim, 2)
    assert wait_ghost(nvim, lambda t: t == PHRASE)  # not only on the first tab
    lua(nvim, "require('local_copilot').accept()")
    wait_for(lambda: nvim.current.buffer[:] == ["def h():", "\trun(a, b)", "\tok"], what="accepted in the new tab")


def test_keystrokes_use_the_workers_channel_and_fall_back_when_it_closes(open_nvim: Any, phrase_server: Any) -> None:
    nvim = open_nvim(phrase_server.url, ["def f():", "\t"])
    at_end_of(nvim, 2)
    assert wait_ghost(nvim, lambda t: t == PHRASE)
    state = wait_for(lambda: (s := nvim.call("LocalCopilotCall", "debug_state"))["channel"] and s,
                     what="the worker's own channel")
    chan = state["channel"]
    assert nvim.api.get_chan_info(chan)["id"] == chan
    # the next keystrokes go there, not through the host's channel
    nvim.input("<Esc>")
    nvim.command("call setline(2, '\t')")
    at_end_of(nvim, 2)
    assert wait_ghost(nvim, lambda t: t == PHRASE)
    assert nvim.call("LocalCopilotCall", "debug_state")["channel_events"] > state["channel_events"]
    # that channel closes: Lua falls back to the host's channel, suggestions keep coming
    nvim.call("chanclose", chan)
    wait_for(lambda: nvim.call("LocalCopilotCall", "debug_state")["channel"] is None, what="the host saw it close")
    events = nvim.call("LocalCopilotCall", "debug_state")["channel_events"]
    nvim.input("<Esc>")
    nvim.command("call setline(2, 'x = 1')")
    nvim.command("call setline(3, '\t')")
    at_end_of(nvim, 3)
    assert wait_ghost(nvim, lambda t: t == PHRASE)
    assert nvim.call("LocalCopilotCall", "debug_state")["channel_events"] == events
    assert not [m for m in nvim.exec_lua("return vim.split(vim.fn.execute('messages'), '\\n')") if "rror" in m]


def test_a_wiped_buffer_leaves_nothing_kept_in_the_host(open_nvim: Any, phrase_server: Any, tmp_path: Path) -> None:
    nvim = open_nvim(phrase_server.url, ["def f():", "\t"])
    at_end_of(nvim, 2)
    assert wait_ghost(nvim, lambda t: t == PHRASE)
    first = nvim.current.buffer.number
    nvim.input("<Esc>")
    nvim.command(f"edit {tmp_path / 'other.py'}")
    nvim.current.buffer[:] = ["def g():", "\t"]
    at_end_of(nvim, 2)
    assert wait_ghost(nvim, lambda t: t == PHRASE)
    second = nvim.current.buffer.number
    state = lambda: nvim.call("LocalCopilotCall", "debug_state")  # noqa: E731
    assert wait_for(lambda: {first, second} <= set(state()["buffers"]))
    nvim.input("<Esc>")
    nvim.command(f"bwipeout! {first}")
    wait_for(lambda: first not in state()["buffers"], what="the wiped buffer forgotten")
    assert second in state()["buffers"]


# What the Lua side keeps of a buffer, read from the modules themselves: its session
# (sessions.lua) and what a module keeps of it outside the session.
LUA_STATE = """
local buf = ...
local s = require('local_copilot.sessions').peek(buf)
local function of_buf(t) local n = 0 for _, x in pairs(t) do if x.buf == buf then n = n + 1 end end return n end
local cur = require('local_copilot.ghost').current
return {
  session = s and vim.tbl_keys(s) or vim.NIL,
  ghost = cur ~= nil and cur.buf == buf,
  edits = of_buf(require('local_copilot.edit').edits),
  recorded = require('local_copilot.edit_recorder').attached(buf),
  waiting = of_buf(require('local_copilot.recent_edits')._waiting()),
}
"""


def test_a_wiped_buffer_leaves_nothing_in_the_lua_state(open_nvim: Any, phrase_server: Any, tmp_path: Path) -> None:
    """The Lua side of the test above: after a suggestion, a next edit, a chunk and an
    instruction edit, `:bwipeout` leaves no session of the buffer and nothing of it in any
    module (one table per buffer, one forget)."""
    nvim = open_nvim(phrase_server.url, ["def f():", "\t", *(["x = 1"] * 80)],
                     next_edit={"enabled": True, "debounce_ms": 20})
    first = nvim.current.buffer.number
    at_end_of(nvim, 2)
    assert wait_ghost(nvim, lambda t: t == PHRASE)
    nvim.input("<Esc>")
    assert lua(nvim, "require('local_copilot').next_edit_request()") is True
    nvim.input("G")  # a jump: the region around it goes to the host as a chunk
    edit_id = nvim.exec_lua("return require('local_copilot').edit({ line1 = 1, line2 = 1, instruction = 'rename' })")
    assert edit_id
    keys = lambda: set(nvim.exec_lua(LUA_STATE, first)["session"])  # noqa: E731
    # (the window sent and the options read come and go with the host's answers and verdicts)
    kept = {"watched", "binary", "next_edit_seq", "recorder", "last_row", "edit_keys"}
    assert wait_for(lambda: kept <= keys(), what="the buffer's state kept in its session")
    assert nvim.exec_lua(LUA_STATE, first)["recorded"] is True

    nvim.command(f"edit {tmp_path / 'other.py'}")
    nvim.command(f"bwipeout! {first}")
    gone = {"session": None, "ghost": False, "edits": 0, "recorded": False, "waiting": 0}
    assert nvim.exec_lua(LUA_STATE, first) == gone
    assert first not in nvim.exec_lua("return require('local_copilot.sessions')._buffers()")
    # answers still on their way for it (the edit's, the next edit's) leave nothing either
    nvim.exec_lua("vim.wait(300)")
    assert nvim.exec_lua(LUA_STATE, first) == gone
    assert nvim.current.buffer.number in nvim.exec_lua("return require('local_copilot.sessions')._buffers()")
