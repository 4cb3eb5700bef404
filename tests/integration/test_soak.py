"""Soak: 10,000 keystrokes into a real headless Neovim against the real tiny llama-server,
with seeded random cursor jumps, buffer switches, new lines, deletes and accepts.

Keys go in batches through nvim_input (as a fast typist's keys arrive); each batch ends with
a <Plug> mapping that counts it, so the test knows when Neovim has consumed the batch. Now and
then the test pauses until a suggestion shows (requests finish, speculative ones start, the
cache fills), sometimes accepting it.

At the end: nothing is stuck (no request or speculative task left on the host, the status is
idle or showing), and the Python host's RSS grew by at most 5 MB after the warm-up.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from local_copilot.servers.llama_cpp import LlamaServer

from ..helpers import wait_for
from .nvim_session import lua, start_nvim

pytestmark = pytest.mark.integration

KEYS = 10_000
WARMUP_KEYS = 1_500
SEED = 20240611
RSS_GROWTH_MB = 5.0
LETTERS = "abcdefghijklmnopqrstuvwyz_ =+-*/().,:0123456789"  # no "x": that is the suggestion


def host_pid(nvim: Any) -> int:
    return int(nvim.exec_lua(
        "for _, c in ipairs(vim.api.nvim_list_chans()) do\n"
        "  if c.stream == 'job' and c.client and c.client.name and c.client.name:find('python') then\n"
        "    return vim.fn.jobpid(c.id)\n"
        "  end\n"
        "end\n"
        "return vim.fn.jobpid(vim.fn['remote#host#Require']('python3'))"))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class Typist:
    def __init__(self, nvim: Any, rng: random.Random, nbufs: int) -> None:
        self.nvim, self.rng, self.nbufs = nvim, rng, nbufs
        self.keys = 0
        self.batches = 0
        self.accepts = 0
        self.paused = 0
        nvim.exec_lua(
            "_G.SOAK = 0\n"
            "vim.keymap.set({ 'n', 'i' }, '<Plug>(soak-mark)', function() SOAK = SOAK + 1 end)")

    def send(self, keys: list[str]) -> None:
        """One batch of keys (each item one keystroke, in nvim_input notation); waits until consumed."""
        self.keys += len(keys)
        self.batches += 1
        data = "".join(keys) + "<Plug>(soak-mark)"
        while data:  # nvim_input takes what fits in its buffer and says how much that was
            n = self.nvim.input(data)
            data = data[n:]
        wait_for(lambda: self.nvim.exec_lua("return SOAK") >= self.batches, what=f"batch {self.batches} consumed")

    def typing(self) -> list[str]:
        out = [self.rng.choice(LETTERS).replace("<", "<lt>") for _ in range(self.rng.randint(1, 12))]
        if self.rng.random() < 0.15:
            out.append("<CR>")
        if self.rng.random() < 0.1:
            out += ["<BS>"] * self.rng.randint(1, 3)
        return out

    def jump(self) -> list[str]:
        lines = int(self.nvim.exec_lua("return vim.api.nvim_buf_line_count(0)"))
        row = self.rng.randint(1, lines)
        return ["<Esc>", *str(row), "G", self.rng.choice(["A", "I", "o"])]

    def switch(self) -> list[str]:
        return ["<Esc>", ":", "b", "n", "e", "x", "t", "<CR>", self.rng.choice(["A", "o"])]

    def pause_for_suggestion(self) -> None:
        """Stop typing until a suggestion shows (or a second passes); maybe accept it."""
        self.paused += 1
        try:
            wait_for(lambda: lua(self.nvim, "require('local_copilot').is_visible()"), timeout=1.0)
        except AssertionError:
            return
        if self.rng.random() < 0.6:
            self.accepts += 1
            self.send([self.rng.choice(["<Plug>(local-copilot-accept)", "<Plug>(local-copilot-accept-word)",
                                        "<Plug>(local-copilot-accept-line)"])])

    def step(self) -> None:
        r = self.rng.random()
        if r < 0.06:
            self.send(self.jump())
        elif r < 0.09:
            self.send(self.switch())
        else:
            self.send(self.typing())
        if self.rng.random() < 0.04:
            self.pause_for_suggestion()


def test_soak_10000_keystrokes(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], llama_server: LlamaServer,
                               tmp_path: Path) -> None:
    started = time.monotonic()
    # no debounce: every batch sends a request that cancels the one before (the most churn)
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backends": {"llama.cpp": {"url": llama_server.url}}, "n_predict": 16, "debounce_ms": 0,
        "adaptive_debounce": False})
    try:
        for i, name in enumerate(["alpha.py", "beta.py", "gamma.lua"]):
            path = tmp_path / name
            path.write_text("\n".join(f"line_{i}_{n} = {n} * {n}  # some text" for n in range(200)) + "\n")
            nvim.command(f"edit {path}")
        nvim.command("set hidden")
        nvim.input("A")
        wait_for(lambda: lua(nvim, "require('local_copilot').is_visible()"), timeout=60, what="the first suggestion")
        pid = host_pid(nvim)
        typist = Typist(nvim, random.Random(SEED), 3)
        baseline: float | None = None
        while typist.keys < KEYS:
            typist.step()
            if baseline is None and typist.keys >= WARMUP_KEYS:
                baseline = rss_mb(pid)
        assert baseline is not None

        # nothing stuck: the last request finishes (or was cancelled), speculative ones too, and
        # a first part's rest, fetched once typing pauses, has been fetched
        def settled() -> dict[str, Any] | None:
            state = nvim.call("LocalCopilotCall", "debug_state")
            return state if state["tasks"] == state["speculative"] == state["pauses"] == 0 else None

        wait_for(settled, timeout=30, what="no request left in flight")
        status = lua(nvim, "require('local_copilot').status()")
        assert status == "idle" or status.startswith("showing"), status
        nvim.input("<Esc>")
        wait_for(lambda: nvim.api.get_mode()["mode"] == "n")
        wait_for(settled, timeout=30, what="no request left after leaving insert mode")
        assert lua(nvim, "require('local_copilot').status()") == "idle"

        counters = nvim.call("LocalCopilotCall", "status")["stats"]["counters"]
        grown = rss_mb(pid) - baseline
        elapsed = time.monotonic() - started
        print(f"soak: {typist.keys} keys in {typist.batches} batches, {typist.paused} pauses, {typist.accepts} accepts, "
              f"{elapsed:.0f} s; host RSS {baseline:.1f} MB after warm-up, grew {grown:+.2f} MB; counters {counters}")
        # it really exercised the lifecycle: many snapshots, each sent as a request or held back
        # until the server answered the one before (`deferred`: the server's queue keeps at most
        # one stale request), many cancelled by the next batch, suggestions shown and accepted
        submitted = counters.get("requests", 0) + counters.get("deferred", 0)
        assert submitted > 500 and counters.get("requests", 0) > 200 and counters.get("cancels", 0) > 100, counters
        assert typist.accepts >= 5, typist.accepts
        assert grown <= RSS_GROWTH_MB, f"host RSS grew {grown:.2f} MB after warm-up"
        messages = nvim.exec_lua("return vim.fn.execute('messages')")
        assert "Traceback" not in messages and "Error" not in messages, messages
    finally:
        nvim.close()
