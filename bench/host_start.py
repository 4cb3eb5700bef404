"""The longest stall of Neovim's main loop while the Python host starts: at the first Insert of
a session, and at a revival after the host was killed.

A uv timer inside Neovim queues a callback on the main loop every 2 ms, which keeps the
longest gap between two runs; any work that holds the main loop (a synchronous start waiting
for the host to answer) shows as a gap that long. Measured from the first key until the host has connected (a suggestion shows
from the tiny llama-server), and from the key after a `kill -9` of the host until the new one
has connected; and from the first key until the message when g:local_copilot_python names a
python without pynvim. The gap includes the timer's own period (2 ms) and the test driver's RPC calls;
`host_running_ms`, the same wait for a suggestion with the host already running, is the floor
to read the two against (on a busy machine the scheduler's own delays show there too).

Run by `make bench` (bench/run.py, budget <= 20 ms); alone:
    python bench/host_start.py [--runs N] [--rtp DIR]
`--rtp` runs another checkout's Lua side (e.g. a `git worktree` of an older commit) against
this one's Python, so a before/after is one run on one machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as H  # noqa: E402

TICK_MS = 2

# A uv timer's callback runs even while Neovim waits inside a call (an rpcrequest, system()
# run libuv's loop), so the timer only schedules: what vim.schedule queues runs on the main
# loop, where keys are handled and the screen redrawn, and waits while that loop is held.
GAP_TIMER = """
_G.BENCH_GAP = { max = 0 }
local last = vim.uv.hrtime()
local function tick()
  local now = vim.uv.hrtime()
  local gap = (now - last) / 1e6
  if gap > BENCH_GAP.max then BENCH_GAP.max = gap end
  last = now
end
local t = vim.uv.new_timer()
t:start(%d, %d, function() vim.schedule(tick) end)
_G.BENCH_GAP_RESET = function() BENCH_GAP.max = 0; last = vim.uv.hrtime() end
""" % (TICK_MS, TICK_MS)

HOST_PID = """
for _, c in ipairs(vim.api.nvim_list_chans()) do
  if c.stream == 'job' and c.client and c.client.type == 'host' then return vim.fn.jobpid(c.id) end
end
return 0
"""


def _start(nvim_bin: str, manifest: Path, env: dict[str, str], rtp: Path, url: str) -> Any:
    argv = [nvim_bin, "--clean", "--embed", "--headless", "-n", "--cmd", f"set rtp^={rtp}",
            "--cmd", f"let g:local_copilot_python = '{sys.executable}'",
            "--cmd", f"let g:python3_host_prog = '{sys.executable}'"]  # (an older checkout's host, --rtp)
    nvim = H.attach_child(argv, env)
    nvim.command(f"let g:loaded_remote_plugins = '{manifest}'")
    nvim.command(f"source {manifest}")
    nvim.exec_lua("require('local_copilot').setup(...)", {"backends": {"llama.cpp": {"url": url}}, "debounce_ms": 0})
    nvim.exec_lua(GAP_TIMER)
    return nvim


def _wait(pred: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.01)
    raise TimeoutError(what)


def _shown(nvim: Any) -> bool:
    return bool(nvim.exec_lua("return require('local_copilot').is_visible()"))


def one_run(nvim_bin: str, manifest: Path, env: dict[str, str], rtp: Path, url: str, workdir: Path) -> dict[str, float]:
    nvim = _start(nvim_bin, manifest, env, rtp, url)
    try:
        path = workdir / "sample.py"
        path.write_text("def add(a, b):\n    return a + b\n\n")
        nvim.command(f"edit {path}")
        nvim.command("normal! G")
        nvim.exec_lua("BENCH_GAP_RESET()")
        nvim.input("ix")
        _wait(lambda: _shown(nvim), 60, "a suggestion after the first Insert")
        first = float(nvim.exec_lua("return BENCH_GAP.max"))
        # the same wait with the host running: what the machine and a suggestion's way cost
        nvim.input("<Esc>o")
        nvim.exec_lua("BENCH_GAP_RESET()")
        nvim.input("x")
        _wait(lambda: _shown(nvim), 60, "a suggestion from the running host")
        steady = float(nvim.exec_lua("return BENCH_GAP.max"))
        pid = int(nvim.exec_lua(HOST_PID))
        os.kill(pid, signal.SIGKILL)
        _wait(lambda: int(nvim.exec_lua(HOST_PID)) != pid, 10, "the dead host's channel closed")
        nvim.exec_lua("BENCH_GAP_RESET()")
        nvim.input("y")
        _wait(lambda: _shown(nvim) and int(nvim.exec_lua(HOST_PID)) not in (0, pid), 60, "a suggestion from a new host")
        revival = float(nvim.exec_lua("return BENCH_GAP.max"))
        return {"first_insert_ms": first, "revival_ms": revival, "host_running_ms": steady}
    finally:
        nvim.close()


def broken_run(nvim_bin: str, manifest: Path, env: dict[str, str], rtp: Path, url: str, workdir: Path,
               python: Path) -> float:
    """The longest stall from the first key until the message that a python without pynvim
    cannot run the host."""
    nvim = _start(nvim_bin, manifest, env, rtp, url)
    try:
        nvim.command(f"let g:local_copilot_python = '{python}'")
        nvim.command(f"edit {workdir / 'broken.py'}")
        nvim.exec_lua("BENCH_GAP_RESET()")
        nvim.input("ix")
        _wait(lambda: "did not start" in nvim.exec_lua("return vim.fn.execute('messages')"), 60, "the message")
        return float(nvim.exec_lua("return BENCH_GAP.max"))
    finally:
        nvim.close()


def _python_without_pynvim(workdir: Path) -> Path:
    venv = workdir / "nopynvim"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return venv / "bin" / "python"


def measure(nvim_bin: str, manifest: Path, env: dict[str, str], url: str, workdir: Path, runs: int,
            rtp: Path = H.REPO) -> dict[str, Any]:
    samples = [one_run(nvim_bin, manifest, env, rtp, url, workdir) for _ in range(runs)]
    python = _python_without_pynvim(workdir)
    for s in samples:
        s["python_without_pynvim_ms"] = broken_run(nvim_bin, manifest, env, rtp, url, workdir, python)
    out: dict[str, Any] = {"runs": runs, "tick_ms": TICK_MS, "rtp": str(rtp)}
    for key in ("first_insert_ms", "revival_ms", "host_running_ms", "python_without_pynvim_ms"):
        vals = [s[key] for s in samples]
        out[key] = {"median": statistics.median(vals), "max": max(vals), "all": vals}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rtp", type=Path, default=H.REPO, help="the checkout whose Lua side runs")
    args = ap.parse_args(argv)
    nvim_bin = H.nvim_binary()
    with tempfile.TemporaryDirectory(prefix="lc-hoststart-") as tmp:
        workdir = Path(tmp)
        manifest = H.make_manifest(nvim_bin, workdir)
        env = H.nvim_env(workdir, manifest)
        with H.tiny_server(workdir) as server:
            res = measure(nvim_bin, manifest, env, server.url, workdir, args.runs, args.rtp.resolve())
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
