"""The Python host starts without holding Neovim's main loop: at the first Insert and at a
revival after the host was killed, Neovim keeps answering while the host is still starting.

The host's python is a wrapper that waits at a gate (a file the test creates) before it runs
the real one, so the host is "still starting" for as long as the test wants. A start that
waited for the host inside the main loop (Neovim's provider asks the new host to answer 'poll',
and first asks the same python for its version) cannot answer the test's next call until the
gate opens; the gate opens by itself after GATE_S seconds so such a run fails instead of hanging.
How long the main loop stalls is measured by `make bench` (bench/host_start.py), not here.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local_copilot.servers.llama_cpp import LlamaServer

from ..helpers import wait_for
from .nvim_session import start_nvim

pytestmark = pytest.mark.integration

GATE_S = 20.0

HOST_PID = """
for _, c in ipairs(vim.api.nvim_list_chans()) do
  if c.stream == 'job' and c.client and c.client.type == 'host' then return vim.fn.jobpid(c.id) end
end
return 0
"""


class Gate:
    def __init__(self, tmp: Path) -> None:
        self.path = tmp / "gate"
        self.python = tmp / "gated-python"
        self.python.write_text(f"#!/bin/sh\nwhile [ ! -e '{self.path}' ]; do sleep 0.01; done\nexec '{sys.executable}' \"$@\"\n")
        self.python.chmod(0o755)
        self._timer: threading.Timer | None = None

    def close(self) -> None:
        """Hosts started from now on wait; the gate opens by itself after GATE_S."""
        self.path.unlink(missing_ok=True)
        self._timer = threading.Timer(GATE_S, self.open)
        self._timer.daemon = True
        self._timer.start()

    def open(self) -> None:
        self.path.touch()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.open()


@pytest.fixture()
def gate(tmp_path: Path) -> Iterator[Gate]:
    g = Gate(tmp_path)
    yield g
    g.stop()


@pytest.fixture()
def nvim(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], llama_server: LlamaServer, gate: Gate) -> Iterator[Any]:
    nv = start_nvim(nvim_bin, manifest, nvim_env)
    nv.command(f"let g:local_copilot_python = '{gate.python}'")
    nv.exec_lua("require('local_copilot').setup(...)", {"backends": {"llama.cpp": {"url": llama_server.url}},
                                                         "debounce_ms": 0})
    yield nv
    nv.close()


def started(nvim: Any) -> bool:
    return bool(nvim.exec_lua("return require('local_copilot.host').running()"))


def shown(nvim: Any) -> bool:
    return bool(nvim.exec_lua("return require('local_copilot').is_visible()"))


def test_neovim_answers_while_the_host_starts_at_the_first_insert_and_at_a_revival(
        nvim: Any, gate: Gate, tmp_path: Path) -> None:
    path = tmp_path / "sample.py"
    path.write_text("def add(a, b):\n    return a + b\n\n")
    nvim.command(f"edit {path}")
    nvim.command("normal! G")

    gate.close()
    nvim.input("ix")
    # the start was asked for, and Neovim answered that question while the host still waits
    wait_for(lambda: started(nvim), what="the host started")
    assert not gate.path.exists(), "Neovim answered only once the host could run (the start held the main loop)"
    assert nvim.api.get_mode() == {"mode": "i", "blocking": False}
    assert nvim.current.buffer[:] == ["def add(a, b):", "    return a + b", "x"]
    gate.stop()
    wait_for(lambda: shown(nvim), what="a suggestion once the host runs")

    # the host dies; the next key starts another, again without holding the main loop
    pid = int(nvim.exec_lua(HOST_PID))
    gate.close()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: int(nvim.exec_lua(HOST_PID)) != pid, what="the dead host's channel closed")
    nvim.input("y")
    wait_for(lambda: "starting a new one" in nvim.exec_lua("return vim.fn.execute('messages')"),
             what="the revival's message")
    assert not gate.path.exists(), "Neovim answered only once the new host could run"
    assert nvim.api.get_mode() == {"mode": "i", "blocking": False}
    assert nvim.current.buffer[-1] == "xy"
    gate.stop()
    wait_for(lambda: shown(nvim) and int(nvim.exec_lua(HOST_PID)) not in (0, pid), what="a suggestion from a new host")
