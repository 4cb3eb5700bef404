"""The plugin's messages as a user sees them: with Neovim's own vim.notify, one line that fits
the command line (a longer one would stop the editor at a hit-enter prompt), the whole text in
the log; with a replacement (nvim-notify, noice), the whole text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from local_copilot.servers.ports import free_port

from ..helpers import wait_for
from .nvim_session import attach_ui, lua, start_nvim

pytestmark = pytest.mark.integration

COLUMNS = 60


def drawn(nvim: Any) -> list[str]:
    """The screen as drawn now (screen_lines redraws first, which in Insert mode puts
    '-- INSERT --' back over a message)."""
    return nvim.exec_lua("local out = {}\n"
                         "for r = 1, vim.o.lines do\n"
                         "  local cells = {}\n"
                         "  for c = 1, vim.o.columns do cells[#cells + 1] = vim.fn.screenstring(r, c) end\n"
                         "  out[#out + 1] = (table.concat(cells):gsub('%s+$', ''))\n"
                         "end\n"
                         "return out")


def test_a_long_failure_message_is_one_line_that_fits_and_never_blocks(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    # a server that is down, at a URL far wider than the screen
    url = f"http://127.0.0.1:{free_port()}/" + "reverse-proxy/" * 8
    nvim = start_nvim(nvim_bin, manifest, nvim_env, columns=COLUMNS,
                      setup={"backends": {"llama.cpp": {"url": url}}, "debounce_ms": 0, "speculative": False})
    try:
        attach_ui(nvim, COLUMNS, 24)
        # (with 'showmode' the next redraw in Insert mode puts '-- INSERT --' over a message)
        nvim.command("set noshowmode")
        nvim.command(f"edit {tmp_path / 'down.py'}")
        nvim.input("ix = ")
        wait_for(lambda: lua(nvim, "require('local_copilot').status()") == "backend down", what="backend down")
        shown = wait_for(lambda: next((ln for ln in drawn(nvim) if ln.startswith("local-copilot:")), None),
                         what="the message on screen")
        assert "Press ENTER" not in "\n".join(drawn(nvim))
        assert nvim.api.get_mode() == {"mode": "i", "blocking": False}
        assert shown.startswith("local-copilot: llama.cpp: cannot reach") and shown.endswith("…"), shown
        assert len(shown) <= lua(nvim, "vim.v.echospace"), shown
        # Neovim still answers, and typing goes on
        nvim.input("1")
        wait_for(lambda: nvim.current.buffer[0] == "x = 1", what="the next key typed")
        # the whole message is in the log, where :LocalCopilot log leads
        log = Path(nvim_env["LOCAL_COPILOT_LOG_DIR"]) / "local_copilot.log"
        wait_for(lambda: url.rstrip("/") in log.read_text(), what="the whole message in the log")
    finally:
        nvim.close()


def test_a_replaced_vim_notify_gets_the_whole_message(nvim_bin: str, manifest: Path,
                                                      nvim_env: dict[str, str]) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, columns=COLUMNS)
    try:
        attach_ui(nvim, COLUMNS, 24)
        long = "local-copilot: " + "word " * 40 + "\nsecond line"
        # as nvim-notify does: a vim.notify of its own that shows long text in a window
        nvim.exec_lua("_G.seen = {}; vim.notify = function(msg) table.insert(_G.seen, msg) end")
        nvim.exec_lua("require('local_copilot').notify(...)", long, "warn")
        assert wait_for(lambda: lua(nvim, "_G.seen")) == [long]
        assert lua(nvim, "require('local_copilot.message').builtin()") is False
    finally:
        nvim.close()


def test_fit_clips_to_the_room_and_joins_lines(nvim_bin: str, manifest: Path, nvim_env: dict[str, str]) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, columns=COLUMNS)
    try:
        fit: Any = lambda msg, room, tail: nvim.exec_lua(  # noqa: E731
            "return require('local_copilot.message').fit(...)", msg, room, tail)
        assert fit("short", 40, "…") == "short"
        assert fit("x" * 100, 40, "… (:LocalCopilot log)") == "x" * 39 + "…"  # the room is the message's
        assert fit("two\n  lines", 40, "…") == "two lines"
        assert fit("x" * 100, 61, "… (:LocalCopilot log)") == "x" * 40 + "… (:LocalCopilot log)"
        assert fit("漢" * 30, 21, "…") == "漢" * 10 + "…"  # double-width characters count twice
        assert lua(nvim, "require('local_copilot.message').builtin()") is True
    finally:
        nvim.close()


def test_a_message_the_log_does_not_hold_is_kept_whole_for_status(nvim_bin: str, manifest: Path,
                                                                  nvim_env: dict[str, str]) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, columns=100)
    try:
        attach_ui(nvim, 100, 24)
        # said by the editor's side (the host may be what is down): not in the host's log
        long = "local-copilot: the Python host did not start (" + "x" * 120 + "); run :checkhealth local_copilot"
        nvim.exec_lua("require('local_copilot.message').show(...)", long, "error", False)
        shown = wait_for(lambda: next((ln for ln in drawn(nvim) if ln.startswith("local-copilot:")), None),
                         what="the message on screen")
        room = lua(nvim, "vim.v.echospace")
        assert shown == long[:room - 1] + "…", shown  # as much of it as fits
        assert nvim.api.get_mode()["blocking"] is False
        status = nvim.exec_lua("return vim.fn.execute('LocalCopilot status')")
        assert "message: " + long in status.splitlines(), status
    finally:
        nvim.close()
