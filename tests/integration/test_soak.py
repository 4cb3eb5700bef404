"""Soak: 10,000 keystrokes into a real headless Neovim against the real tiny llama-server,
with seeded random cursor jumps, buffer switches, new lines, deletes and accepts.

Typed text goes a key at a time, the next once the host has answered the last (or 2 s passed),
as a user types against a fast server: every key is a snapshot, a request, an answer
post-processed and drawn. Keys in batches through one nvim_input are one snapshot per batch,
and keys faster than the server answers are held back: the host then answered about one key in
28, and its caches filled that much slower than a user's. Moves, switches and accepts go as
batches. Each ends with a <Plug> mapping that counts it, so the test knows when Neovim has
consumed it. Now and then the test pauses until a suggestion shows (requests finish,
speculative ones start, the cache fills), sometimes accepting it.

At the end: nothing is stuck (no request or speculative task left on the host, the status is
idle or showing), and the Python host's RSS, read every 1,000 keys (printed, and written to
bench/results/soak-rss.json), grew by at most 5 MB after the warm-up and has levelled off: at
most 1 MB over the last 5,000 keys.

LOCAL_COPILOT_TRACEMALLOC=FILE with PYTHONPATH=bench/memtrace: the host traces its allocations
and, at each reading, appends to FILE what grew since the first (bench/memtrace/sitecustomize.py).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from local_copilot.servers.llama_cpp import LlamaServer

from ..helpers import wait_for
from .nvim_session import lua, start_nvim

pytestmark = [pytest.mark.integration, pytest.mark.background]  # beside the rest of the suite: tests/background.py

KEYS = 10_000
WARMUP_KEYS = 1_500
SEED = 20240611
RSS_GROWTH_MB = 5.0
SETTLED_KEYS = 5_000  # the last ones: the caches are full by then
SETTLED_GROWTH_MB = 1.0
RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "soak-rss.json"
LETTERS = "abcdefghijklmnopqrstuvwyz_ =+-*/().,:0123456789"  # no "x": that is the suggestion


def host_pid(nvim: Any) -> int:
    return int(nvim.exec_lua(
        "for _, c in ipairs(vim.api.nvim_list_chans()) do\n"
        "  if c.stream == 'job' and c.client and c.client.name and c.client.name:find('python') then\n"
        "    return vim.fn.jobpid(c.id)\n"
        "  end\n"
        "end\n"
        "return vim.fn.jobpid(vim.fn['remote#host#Require']('local_copilot'))"))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class RandomTyping:
    """The soak's user: types, jumps, switches buffers and accepts, from a seeded random source."""

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

    def type_key(self, key: str) -> None:
        """One key, then wait until Neovim consumed it and the host answered (2 s at most)."""
        self.keys += 1
        self.batches += 1
        data = key + "<Plug>(soak-mark)"
        while data:
            data = data[self.nvim.input(data):]
        if not self.nvim.exec_lua("local n = ...\n"
                                  "vim.wait(2000, function()\n"
                                  "  return SOAK >= n and require('local_copilot').status() ~= 'waiting'\n"
                                  "end, 1)\n"
                                  "return SOAK >= n", self.batches):
            wait_for(lambda: self.nvim.exec_lua("return SOAK") >= self.batches, what=f"key {self.batches} consumed")

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
            for key in self.typing():
                self.type_key(key)
        if self.rng.random() < 0.04:
            self.pause_for_suggestion()


class Trace:
    """With LOCAL_COPILOT_TRACEMALLOC set (and bench/memtrace on PYTHONPATH), asks the host for
    its allocation report (SIGUSR1) and waits until it is written."""

    def __init__(self, pid: int) -> None:
        self.pid, self.n = pid, 0
        out = os.environ.get("LOCAL_COPILOT_TRACEMALLOC")
        self.done = Path(out + ".done") if out else None
        if self.done is not None:
            self.done.unlink(missing_ok=True)

    def dump(self) -> None:
        if self.done is None:
            return
        self.n += 1
        os.kill(self.pid, signal.SIGUSR1)
        done = self.done
        wait_for(lambda: done.exists() and int(done.read_text() or 0) >= self.n, timeout=300, what="the host's report")


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
        # Neovim highlights Lua with Tree-sitter by default, and the random text makes gamma.lua
        # one long syntax error: re-parsing it took ~6 of Neovim's ~10 ms of CPU per key (80%
        # of its Lua time in languagetree.lua's _parse_regions, by LuaJIT's profiler). The
        # plugin draws no Tree-sitter highlights; the soak goes without them.
        nvim.exec_lua("for _, buf in ipairs(vim.api.nvim_list_bufs()) do vim.treesitter.stop(buf) end")
        nvim.input("A")
        wait_for(lambda: lua(nvim, "require('local_copilot').is_visible()"), timeout=60, what="the first suggestion")
        pid = host_pid(nvim)
        typist = RandomTyping(nvim, random.Random(SEED), 3)
        baseline: float | None = None
        curve = [(0, rss_mb(pid))]  # (keys typed, host RSS MB)
        trace = Trace(pid)
        trace.dump()
        while typist.keys < KEYS:
            typist.step()
            if baseline is None and typist.keys >= WARMUP_KEYS:
                baseline = rss_mb(pid)
            if 1000 * len(curve) <= typist.keys < KEYS:  # the last reading is taken once all is settled
                curve.append((typist.keys, rss_mb(pid)))
                trace.dump()
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
        curve.append((typist.keys, rss_mb(pid)))
        grown = curve[-1][1] - baseline
        settled_from = next(mb for keys, mb in curve if keys >= KEYS - SETTLED_KEYS)
        settled = curve[-1][1] - settled_from
        elapsed = time.monotonic() - started
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps({"rss_mb": [[k, round(mb, 2)] for k, mb in curve], "warmup_keys": WARMUP_KEYS,
                                       "after_warmup_mb": round(grown, 2), "last_keys": SETTLED_KEYS,
                                       "last_mb": round(settled, 2), "seconds": round(elapsed), "counters": counters},
                                      indent=1) + "\n")
        print(f"soak: {typist.keys} keys in {typist.batches} batches, {typist.paused} pauses, {typist.accepts} accepts, "
              f"{elapsed:.0f} s; host RSS {baseline:.1f} MB after warm-up, grew {grown:+.2f} MB, {settled:+.2f} MB "
              f"over the last {SETTLED_KEYS} keys; counters {counters}")
        print("soak: host RSS MB by keys typed: " + ", ".join(f"{k}: {mb:.2f}" for k, mb in curve))
        # it really exercised the lifecycle: many snapshots, each sent as a request or held back
        # until the server answered the one before (`deferred`: the server's queue keeps at most
        # one stale request), many cancelled by the next batch, suggestions shown and accepted
        submitted = counters.get("requests", 0) + counters.get("deferred", 0)
        assert submitted > 500 and counters.get("requests", 0) > 200 and counters.get("cancels", 0) > 100, counters
        assert typist.accepts >= 5, typist.accepts
        assert grown <= RSS_GROWTH_MB, f"host RSS grew {grown:.2f} MB after warm-up: {curve}"
        assert settled <= SETTLED_GROWTH_MB, f"host RSS grew {settled:.2f} MB over the last {SETTLED_KEYS} keys: {curve}"
        messages = nvim.exec_lua("return vim.fn.execute('messages')")
        assert "Traceback" not in messages and "Error" not in messages, messages
    finally:
        nvim.close()
