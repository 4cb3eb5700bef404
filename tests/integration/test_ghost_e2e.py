"""The walking skeleton end to end: real headless Neovim, the plugin registered by
:UpdateRemotePlugins, a real llama-server with the deterministic tiny model ("x" forever)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..helpers import wait_for
from .nvim_session import buffer_text, extmarks, start_nvim, wait_ghost

pytestmark = pytest.mark.integration


@pytest.fixture()
def nvim(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], llama_server: Any, tmp_path: Path):
    opts = {"backends": {"llama.cpp": {"url": llama_server.url}}, "n_predict": 6, "debounce_ms": 0}
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup=opts)
    nv.command(f"edit {tmp_path / 'sample.py'}")
    nv.current.buffer[:] = ["def add(a, b):", "    return a + b", ""]
    yield nv
    nv.close()


def test_typing_shows_ghost_text_at_the_cursor(nvim: Any) -> None:
    nvim.command("normal! G")
    nvim.input("iprint(")
    text = wait_ghost(nvim, lambda t: t == "xxxxxx")
    assert text == "xxxxxx"
    [(_, row, col, details)] = extmarks(nvim)
    cursor = nvim.current.window.cursor
    assert (row, col) == (cursor[0] - 1, cursor[1]) == (2, len("print("))
    assert details["virt_text_pos"] == "inline"
    assert details["virt_text"][0][1] == "LocalCopilotSuggestion"
    # the default highlight links to Comment, so it looks grey in any colour scheme
    assert nvim.exec_lua("return vim.api.nvim_get_hl(0, { name = 'LocalCopilotSuggestion' }).link") == "Comment"
    assert buffer_text(nvim).endswith("\nprint(")  # nothing inserted without an accept


def test_accept_inserts_as_one_undo_step_with_cursor_at_end(nvim: Any) -> None:
    nvim.command("normal! G")
    nvim.input("iz = ")
    wait_ghost(nvim, lambda t: t == "xxxxxx")
    assert nvim.exec_lua("return require('local_copilot').is_visible()") is True
    assert nvim.exec_lua("return require('local_copilot').accept()") is True
    wait_for(lambda: nvim.current.buffer[2] == "z = xxxxxx", what="accepted text")
    assert tuple(nvim.current.window.cursor) == (3, len("z = xxxxxx"))
    nvim.input("<Esc>")
    wait_for(lambda: nvim.api.get_mode()["mode"] == "n")
    nvim.command("undo")
    assert nvim.current.buffer[2] == "z = "


def test_accept_returns_false_when_nothing_is_shown(nvim: Any) -> None:
    assert nvim.exec_lua("return require('local_copilot').accept()") is False
    assert buffer_text(nvim) == "def add(a, b):\n    return a + b\n"


def test_plug_mapping_accepts(nvim: Any) -> None:
    nvim.command("imap <C-l> <Plug>(local-copilot-accept)")
    nvim.command("normal! G")
    nvim.input("iy = ")
    wait_ghost(nvim, lambda t: t == "xxxxxx")
    nvim.input("<C-l>")
    wait_for(lambda: nvim.current.buffer[2] == "y = xxxxxx", what="accepted via <Plug>")


def test_typing_on_replaces_the_suggestion_never_a_stale_one(nvim: Any) -> None:
    nvim.command("normal! G")
    nvim.input("ia")
    wait_ghost(nvim)
    nvim.input("bc")
    # the mark follows the cursor: a suggestion for "a" is never left at the old column
    def settled() -> bool:
        marks = extmarks(nvim)
        cursor = nvim.current.window.cursor
        return bool(marks) and (marks[0][1], marks[0][2]) == (cursor[0] - 1, cursor[1]) == (2, 3)

    wait_for(settled, what="suggestion at the new cursor")
    # the stream may still be arriving there: partial text first, then the whole of it
    assert wait_ghost(nvim, lambda t: t == "xxxxxx") == "xxxxxx"
    assert settled() and len(extmarks(nvim)) == 1
    nvim.input("<Esc>")
    wait_for(lambda: not extmarks(nvim), what="cleared on InsertLeave")
    assert buffer_text(nvim).endswith("\nabc")


def test_a_character_that_does_not_continue_the_suggestion_is_never_drawn_beside_it(nvim: Any) -> None:
    """Neovim redraws the line for a typed character before CursorMovedI runs: the suggestion
    must be gone by then, or one frame shows it in front of the new character ("a" + ghost + "b")
    and a second redraw of the line follows."""
    nvim.exec_lua(
        "local ns = vim.api.nvim_create_namespace('local_copilot')\n"
        "_G.DRAWN = {}\n"
        "vim.api.nvim_set_decoration_provider(vim.api.nvim_create_namespace('test_drawn'), {\n"
        "  on_line = function(_, _, buf, row)\n"
        "    if row ~= 2 then return end\n"
        "    local line = vim.api.nvim_buf_get_lines(buf, row, row + 1, false)[1]\n"
        "    local mark = vim.api.nvim_buf_get_extmarks(buf, ns, { row, 0 }, { row, -1 }, { details = true })[1]\n"
        "    table.insert(_G.DRAWN, { line = line, col = mark and mark[3] or -1,\n"
        "      ghost = mark and mark[4].virt_text and mark[4].virt_text[1][1] or '' })\n"
        "  end,\n"
        "})"
    )
    nvim.command("normal! G")
    nvim.input("ia")
    assert wait_ghost(nvim, lambda t: t == "xxxxxx") == "xxxxxx"
    nvim.exec_lua("_G.DRAWN = {}")
    nvim.input("b")  # the suggestion starts with "x": "b" does not continue it
    wait_for(lambda: [m[1:3] for m in extmarks(nvim)] == [[2, 2]], what="the new suggestion after 'b'")
    drawn = nvim.exec_lua("return _G.DRAWN")
    assert any(d["line"] == "ab" for d in drawn), drawn  # the line was drawn with the character
    stale = [d for d in drawn if d["line"] == "ab" and d["col"] == 1]
    assert not stale, f"the old suggestion was drawn in front of the typed character: {drawn}"


def test_an_answer_with_nothing_to_show_leaves_the_status_idle(nvim: Any) -> None:
    """The model writes "x" forever: on a blank line above "xxxxxx" its answer only repeats that
    line, which post-processing drops. The request is over; the status line must not say
    "waiting" until the next one."""
    nvim.current.buffer[:] = ["", "xxxxxx"]
    nvim.command("normal! gg")
    nvim.input("i")
    wait_for(lambda: nvim.call("LocalCopilotCall", "debug_state")["tasks"] == 0
             and nvim.call("LocalCopilotCall", "status")["stats"]["counters"].get("requests", 0) >= 1,
             what="the request answered")
    assert extmarks(nvim) == []
    wait_for(lambda: nvim.exec_lua("return require('local_copilot').status()") == "idle", timeout=5,
             what="the status back to idle")
    assert buffer_text(nvim) == "\nxxxxxx"  # nothing inserted


def test_a_host_started_by_a_sync_call_still_hears_every_event(nvim: Any) -> None:
    # `:LocalCopilot stats` (or :checkhealth) before the first key starts the host through
    # LocalCopilotCall; events then go on the worker's own channel and LocalCopilotEvent is
    # never called. What the host is only told (an accept, typed-through, a cancel) must still
    # reach it: the accept is counted
    nvim.command("LocalCopilot stats")
    wait_for(lambda: nvim.exec_lua("return require('local_copilot.host').running()") is True, what="host up")
    nvim.command("close")
    nvim.command("normal! G")
    nvim.input("iz = ")
    wait_ghost(nvim, lambda t: t == "xxxxxx")
    assert nvim.exec_lua("return require('local_copilot').accept()") is True

    def accepts() -> int:
        return int(nvim.call("LocalCopilotCall", "status")["stats"]["counters"].get("accepts_full", 0))

    wait_for(lambda: accepts() == 1, what="the accept counted by the host")
