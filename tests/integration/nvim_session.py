"""Drive a real headless Neovim with the plugin loaded, from the test process."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pynvim

from ..helpers import wait_for

REPO = Path(__file__).resolve().parents[2]


def isolated_env(root: Path, manifest: Path) -> dict[str, str]:
    """This environment with Neovim's and the plugin's state, data, config, log and runtime
    directories under `root`, and the remote plugin manifest `manifest`."""
    env = dict(os.environ)
    env.update(
        NVIM_RPLUGIN_MANIFEST=str(manifest),
        XDG_STATE_HOME=str(root / "state"),
        XDG_DATA_HOME=str(root / "data"),
        XDG_CONFIG_HOME=str(root / "config"),
        LOCAL_COPILOT_LOG_DIR=str(root / "log"),
        LOCAL_COPILOT_RUNTIME_DIR=str(root / "run"),
    )
    return env


def attach_child(argv: list[str], env: dict[str, str]) -> pynvim.Nvim:
    """An embedded Neovim started from `argv` in environment `env` (pynvim's child attach
    inherits this process's environment, so it is swapped in for the start)."""
    old = dict(os.environ)
    os.environ.update(env)
    try:
        return pynvim.attach("child", argv=argv)
    finally:
        os.environ.clear()
        os.environ.update(old)


def start_nvim(nvim_bin: str, manifest: Path, env: dict[str, str], *, setup: dict[str, Any] | None = None,
               columns: int = 80, lines: int = 24) -> pynvim.Nvim:
    argv = [
        nvim_bin, "--clean", "--embed", "--headless", "-n",
        "--cmd", f"set rtp^={REPO}",
        "--cmd", f"let g:python3_host_prog = '{sys.executable}'",
        "--cmd", f"set columns={columns} lines={lines}",
    ]
    nvim = attach_child(argv, env)
    # --clean skips loading the manifest; load ours like a normal start would
    nvim.command(f"let g:loaded_remote_plugins = '{manifest}'")
    nvim.command(f"source {manifest}")
    if setup is not None:
        nvim.exec_lua("require('local_copilot').setup(...)", setup)
    return nvim


def extmarks(nvim: pynvim.Nvim) -> list[Any]:
    return nvim.exec_lua(
        "local ns = vim.api.nvim_create_namespace('local_copilot')\n"
        "return vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })"
    )


def ghost_text(nvim: pynvim.Nvim) -> str | None:
    """The suggestion as drawn: inline virt_text, then one line per virt_lines entry."""
    marks = extmarks(nvim)
    if not marks:
        return None
    details = marks[0][3]
    parts = ["".join(chunk[0] for chunk in details.get("virt_text", []))]
    for vl in details.get("virt_lines") or []:
        parts.append("".join(chunk[0] for chunk in vl))
    return "\n".join(parts)


def suggestion(nvim: pynvim.Nvim) -> str | None:
    """The suggestion drawn at the cursor, with its real tabs (the extmark shows them
    expanded to spaces, as the screen does)."""
    return nvim.exec_lua(
        "local g = require('local_copilot.ghost')\n"
        "local ns = vim.api.nvim_create_namespace('local_copilot')\n"
        "if #vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, {}) == 0 or not g.current then return nil end\n"
        "return g.text()"
    )


def wait_ghost(nvim: pynvim.Nvim, pred: Any = bool, **kw: Any) -> str:
    """Wait until a drawn suggestion satisfies `pred`; returns its text."""
    seen: list[str | None] = [None]

    def check() -> str | None:
        text = seen[0] = suggestion(nvim)
        return text if text is not None and pred(text) else None

    try:
        return wait_for(check, what="ghost text", **kw)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last suggestion drawn: {seen[0]!r}, on screen: {ghost_text(nvim)!r}") from None


def buffer_text(nvim: pynvim.Nvim) -> str:
    return "\n".join(nvim.current.buffer[:])


def attach_ui(nvim: pynvim.Nvim, columns: int = 80, lines: int = 24) -> None:
    """Attach a UI so Neovim renders a screen grid (read back with screen_lines)."""
    nvim.ui_attach(columns, lines, rgb=True, ext_linegrid=True)


def screen_lines(nvim: pynvim.Nvim) -> list[str]:
    """The text on screen, row by row, as a user sees it (virtual text included)."""
    return nvim.exec_lua(
        "vim.cmd('redraw')\n"
        "local out = {}\n"
        "for r = 1, vim.o.lines do\n"
        "  local cells = {}\n"
        "  for c = 1, vim.o.columns do cells[#cells + 1] = vim.fn.screenstring(r, c) end\n"
        "  out[#out + 1] = (table.concat(cells):gsub('%s+$', ''))\n"
        "end\n"
        "return out"
    )


def lua(nvim: pynvim.Nvim, expr: str) -> Any:
    return nvim.exec_lua("return " + expr)


def messages(nvim: pynvim.Nvim) -> str:
    """:messages, as the user reads them."""
    return nvim.exec_lua("return vim.fn.execute('messages')")


def health_report(nvim: pynvim.Nvim) -> str:
    """:checkhealth local_copilot, as the user reads it (it opens in the current window)."""
    nvim.command("checkhealth local_copilot")
    return "\n".join(nvim.current.buffer[:])


def log_text(env: dict[str, str]) -> str:
    """The plugin's log file in the environment `env` (isolated_env's), '' before it exists."""
    path = Path(env["LOCAL_COPILOT_LOG_DIR"]) / "local_copilot.log"
    return path.read_text() if path.exists() else ""


class Typist:
    """Types at the end of the buffer's last line in a real Neovim as a user does: a key at a
    time, each shown before the next goes."""

    def __init__(self, nvim: pynvim.Nvim) -> None:
        self.nvim, self.typed, self.line = nvim, "", ""

    def start(self, lines: list[str]) -> None:
        """`lines` in the buffer, and Insert mode at the end of the last one."""
        self.nvim.current.buffer[:] = lines
        self.nvim.command(f"call cursor({len(lines)}, 1)")
        self.nvim.input("A")
        wait_for(lambda: self.nvim.api.get_mode()["mode"] == "i", what="insert mode")
        self.line, self.typed = lines[-1], ""

    def last_line(self) -> str:
        return self.nvim.current.buffer[-1]

    def type(self, keys: str) -> None:
        """Each key, once the line shows all typed so far (nothing else changed it)."""
        for k in keys:
            self.nvim.input(k)
            self.typed += k
            wait_for(lambda: self.last_line() == self.line + self.typed, what=f"{k!r} typed")
