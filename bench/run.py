"""`make bench`: every budget of the design (`budgets()` below lists them with their limits),
measured against a real headless Neovim and the deterministic tiny llama-server, printed as a
table and written to bench/results/*.json.

What runs (see README, "Benchmarks"):

* typing bursts: 8 keys at 90 ms/key, typed inside Neovim by a uv timer (nvim_input), text
  that never matches the suggestion ("xxxx..."), then a pause until everything settles.
  Measured per burst, all inside Neovim with vim.uv.hrtime (bench/instrument.lua):
    (a) last key fed -> first drawn suggestion for that text (ghost.show placed the extmark)
    (c) plugin main-thread time per key: autocmd callbacks, trigger() and ghost.show
  and outside it:
    (b) llama-server --metrics deltas: tokens predicted, prompt tokens evaluated (not cached),
        against n_predict and one full prompt (/slots n_prompt_tokens of the last request)
    (d) the Python host's utime+stime (/proc/PID/stat) per key, and its VmRSS
  The bursts run once per settings profile: the defaults first, then the others listed.
* (e) snapshot + prompt on a 1,000- vs a 100,000-line buffer: trigger() in Neovim (snapshot and
  notification) plus what the host runs for it: the message decoded into a snapshot and its window
  fitted to the prompt budget (WindowFitter, fresh: the cursor at a new place).
* (f) `nvim --startuptime` with and without the plugin installed (pack/*/start + manifest).
* (g) no budget, a yardstick: the CPU one wakeup of a Python thread costs on this machine after
  1 ms and after 90 ms idle, and two steps of the host's per-key work warm and after 90 ms idle
  (bench/wakeup.py), to read the host CPU per key against.
* (h) no budget, a yardstick: the floor under the host CPU per key, the CPU of the leanest
  Python loop that does a keystroke's I/O (bench/floor.py) against the same tiny llama-server.
* (i) Neovim's main thread CPU added per key, whole thread: the same bursts with the plugin
  enabled and disabled, interleaved, read from the thread's schedstat with nothing polling
  Neovim while a burst runs. (c) times the plugin's own callbacks only; this also counts what
  they cause around them: each plan's RPC message, decode and nvim_exec_lua, the redraw of the
  ghost text, and cold caches for all of it (split by two more variants).
* (k) the longest stall of Neovim's main loop while the Python host starts, at the first Insert
  and at a revival after `kill -9` (bench/host_start.py: a callback queued every 2 ms, the
  longest gap between two runs), beside the same wait with the host already running.
* (j) next edits: Neovim's main-thread time per change the edit recorder records
  (bench/next_edit_recorder.lua, headless, no server): while typing, and with every change far
  from the last (its worst case).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


import floor  # noqa: E402
import harness as H  # noqa: E402
import host_start  # noqa: E402
import wakeup  # noqa: E402
from local_copilot.config import load_config  # noqa: E402
from local_copilot.nvim import protocol  # noqa: E402
from local_copilot.prompt.budget import TokenEstimator  # noqa: E402
from local_copilot.prompt.window import WindowFitter  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
INTERVAL_MS = 90
KEYS_PER_BURST = 8
N_PREDICT = 128  # the default; every profile uses it

# Settings profiles for the typing bursts. The defaults come first: they are the verdict.
PROFILES: dict[str, dict[str, Any]] = {
    "defaults": {},
    # one request of n_predict per keystroke (no first part): what staging saves
    "one-request": {"n_predict_first": 0},
    # the old defaults: wait 20 ms, longer while typing fast
    "debounce": {"debounce_ms": 20, "adaptive_debounce": True},
    # the defaults with completions through httpx instead of the hand-written client (the A/B)
    "httpx": {},
}
# what a profile changes in the host's environment: `httpx` puts bench/hooks first on the
# host's PYTHONPATH, whose sitecustomize.py sends the completions through httpx
HOOKS = Path(__file__).resolve().parent / "hooks"
PROFILE_ENV: dict[str, dict[str, str]] = {
    "httpx": {"PYTHONPATH": os.pathsep.join(filter(None, [str(HOOKS), os.environ.get("PYTHONPATH", "")]))},
}

# 8 keys each, code-like, never starting a run of "x" (the suggestion): no typed-through
BURSTS = [
    "total = ", "count + ", "return v", "self.nam", "if a > b", "for i in", "print(s)", "values[i",
    "name = f", "await q.", "data = d", "yield it", "b = a[1]", "result =", "path / n", "lines[0]",
    "args = p", "key in d", "not done", "size - 1", "obj.item", "raise Va", "level = ", "import o",
]


log, pct = H.log, H.pct


# ------------------------------------------------------------------------------ the sample file


def sample_source(n_lines: int) -> list[str]:
    """Plausible Python, `n_lines` long (functions and a class, ~35 bytes per line)."""
    out: list[str] = ["import os", "import sys", "from pathlib import Path", ""]
    i = 0
    while len(out) < n_lines:
        out += [
            f"def handle_{i}(request, config):",
            f'    """Handle request number {i} with the given config."""',
            "    items = [item for item in request.items if item.enabled]",
            f"    limit = config.get('limit_{i}', {i % 50 + 10})",
            "    for index, item in enumerate(items[:limit]):",
            "        if item.name.startswith('_'):",
            "            continue",
            f"        request.log.append((index, item.name, {i}))",
            "    return len(items)",
            "",
        ]
        i += 1
    return out[:n_lines]


# ------------------------------------------------------------------------------ typing bursts


class Burster:
    def __init__(self, nvim: Any, server_url: str) -> None:
        self.nvim = nvim
        self.url = server_url

    def settle(self, timeout: float = 20.0) -> None:
        H.settle(self.nvim, self.url, timeout)

    def ghost_for_current_text(self) -> bool:
        return bool(self.nvim.exec_lua(
            "local g = require('local_copilot.ghost')\n"
            "return g.current ~= nil and g.current.tick == vim.api.nvim_buf_get_changedtick(0) and g.text() ~= ''"))

    def new_line(self) -> None:
        self.nvim.input("<CR>")
        H.wait_for(self.ghost_for_current_text, timeout=20, what="a suggestion on the new line")
        self.settle()

    def single_key(self, key: str) -> float | None:
        """One key typed after a pause (nothing running): key fed -> suggestion drawn, ms."""
        nvim = self.nvim
        nvim.exec_lua("LCB.burst(...)", [key], INTERVAL_MS)
        H.wait_for(lambda: nvim.exec_lua("return LCB.done"), timeout=20, what="the key typed")
        H.wait_for(self.ghost_for_current_text, timeout=20, what="a suggestion after the key")
        res = nvim.exec_lua("return LCB.result()")
        nvim.exec_lua("LCB.stop()")
        self.settle()
        draws = [d for d in res["draws"] if d["tick"] == res["tick"] and d["t"] >= res["keys"][-1]]
        return (draws[0]["t"] - res["keys"][-1]) / 1e6 if draws else None

    def burst(self, text: str, pid: int) -> dict[str, Any]:
        nvim = self.nvim
        self.new_line()
        m0, cpu0 = H.metrics(self.url), H.proc_cpu_s(pid)
        nvim.exec_lua("LCB.burst(...)", list(text), INTERVAL_MS)
        H.wait_for(lambda: nvim.exec_lua("return LCB.done"), timeout=20, what="the burst typed")
        H.wait_for(self.ghost_for_current_text, timeout=20, what="a suggestion after the burst")
        self.settle()
        cpu1, m1 = H.proc_cpu_s(pid), H.metrics(self.url)
        res = nvim.exec_lua("return LCB.result()")
        nvim.exec_lua("LCB.stop()")
        slots = H.HTTP.get(self.url + "/slots").json()
        keys = res["keys"]
        last = keys[-1]
        draws = [d for d in res["draws"] if d["tick"] == res["tick"] and d["t"] >= last]
        latency = (draws[0]["t"] - last) / 1e6 if draws else None
        busy, cpu = _per_key(res["busy"]), _per_key(res.get("cpu") or [])
        d = {k: m1.get(k, 0) - m0.get(k, 0) for k in m1}
        after_pause = self.single_key(" ")
        return {
            "after_pause_latency_ms": after_pause,
            "text": text,
            "keys_ms": [(k - keys[0]) / 1e6 for k in keys],
            "latency_ms": latency,
            "main_thread_ms_per_key": [b / 1e6 for b in busy],
            "main_thread_cpu_ms_per_key": [c / 1e6 for c in cpu],
            "trigger_us": [t / 1000 for t in res.get("trigger_ns") or []],
            "main_thread_by_callback_ms": {k: round(v["ns"] / 1e6, 3) for k, v in (res.get("by_name") or {}).items()},
            "tokens_predicted": d.get("llamacpp:tokens_predicted_total", 0),
            "prompt_tokens": d.get("llamacpp:prompt_tokens_total", 0),
            "prompt_tokens_cached": d.get("llamacpp:prompt_tokens_cached_total", 0),
            "full_prompt": max((s.get("n_prompt_tokens", 0) for s in slots), default=0),
            "host_cpu_ms_per_key": (cpu1 - cpu0) * 1000 / KEYS_PER_BURST,
        }


def _spread(values: list[float]) -> dict[str, float]:
    return {"p50": pct(values, 50), "p90": pct(values, 90),
            "mean": statistics.fmean(values) if values else float("nan")}


def _per_key(values: Any) -> list[float]:
    """Key index -> value, as a list of KEYS_PER_BURST (a Lua table with holes arrives as a map)."""
    if isinstance(values, dict):
        return [values.get(i, values.get(str(i), 0)) for i in range(1, KEYS_PER_BURST + 1)]
    return (list(values) + [0] * KEYS_PER_BURST)[:KEYS_PER_BURST]


def _typing_in_sample(nvim: Any, server: Any, path: Path) -> Burster:
    """Insert mode mid-way through a 400-line sample file, its first suggestion shown and done."""
    path.write_text("\n".join(sample_source(400)) + "\n")
    nvim.command(f"edit {path}")
    nvim.command("call cursor(200, 1)")
    nvim.input("A")
    b = Burster(nvim, server.url)
    H.wait_for(b.ghost_for_current_text, timeout=60, what="the first suggestion (host start)")
    b.settle()
    return b


def run_profile(name: str, opts: dict[str, Any], server: Any, env: dict[str, str], nvim_bin: str, manifest: Path,
                workdir: Path, bursts: int, warmup: int) -> dict[str, Any]:
    setup = {"backends": {"llama.cpp": {"url": server.url}}, **opts}
    nvim = H.start_nvim(nvim_bin, manifest, env, setup)
    try:
        b = _typing_in_sample(nvim, server, workdir / "sample.py")
        pid = H.host_pid(nvim)
        samples: list[dict[str, Any]] = []
        for i in range(warmup + bursts):
            text = BURSTS[i % len(BURSTS)]
            s = b.burst(text, pid)
            if i >= warmup:
                samples.append(s)
            log(f"  {name} burst {i + 1 - warmup if i >= warmup else 'warm-up'}: "
                f"{s['latency_ms'] if s['latency_ms'] is None else round(s['latency_ms'], 1)} ms, "
                f"{s['tokens_predicted']:.0f} tokens, {s['prompt_tokens']:.0f} prompt tokens")
        state = nvim.call("LocalCopilotCall", "debug_state")
        rss_kb = H.proc_rss_kb(pid)
        counters = nvim.call("LocalCopilotCall", "status")["stats"]["counters"]
        messages = nvim.exec_lua("return vim.fn.execute('messages')")
    finally:
        nvim.close()
    lat = [s["latency_ms"] for s in samples if s["latency_ms"] is not None]
    per_key = [v for s in samples for v in s["main_thread_ms_per_key"]]
    cpu_per_key = [v for s in samples for v in s["main_thread_cpu_ms_per_key"]]
    return {
        "settings": _settings(opts),
        "bursts": len(samples),
        "missing_suggestions": sum(1 for s in samples if s["latency_ms"] is None),
        "latency_ms": {"p50": pct(lat, 50), "p90": pct(lat, 90), "min": min(lat, default=float("nan")),
                       "max": max(lat, default=float("nan"))},
        "after_pause_latency_ms": {"p50": pct([s["after_pause_latency_ms"] for s in samples
                                               if s["after_pause_latency_ms"] is not None], 50)},
        "tokens_predicted_per_burst": statistics.median(s["tokens_predicted"] for s in samples),
        "prompt_tokens_per_burst": statistics.median(s["prompt_tokens"] for s in samples),
        "full_prompt_tokens": statistics.median(s["full_prompt"] for s in samples),
        "main_thread_ms_per_key": _spread(per_key),
        "main_thread_cpu_ms_per_key": _spread(cpu_per_key),
        "main_thread_by_callback_ms_per_key": _by_callback(samples),
        "trigger_us": {"p50": pct([t for s in samples for t in s["trigger_us"]], 50),
                       "p90": pct([t for s in samples for t in s["trigger_us"]], 90)},
        "host_cpu_ms_per_key": {"p50": pct([s["host_cpu_ms_per_key"] for s in samples], 50),
                                "mean": statistics.fmean(s["host_cpu_ms_per_key"] for s in samples)},
        # what the CPU goes with: streamed tokens (the server's count, one SSE event each)
        "host_cpu_us_per_token": 1000 * sum(s["host_cpu_ms_per_key"] * KEYS_PER_BURST for s in samples)
        / max(1.0, sum(s["tokens_predicted"] for s in samples)),
        "host_rss_mb": rss_kb / 1024,
        "host_counters": counters,
        "host_state_after": state,
        "errors_in_messages": [ln for ln in messages.splitlines() if "local-copilot" in ln or "Error" in ln],
        "samples": samples,
    }


def _thread_cpu_ns(pid: int, tid: int) -> int:
    return int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])


# The main-thread row's Neovim: no bench/instrument.lua (its wrappers run on that thread), a
# plain typer, and the variants that split what the plugin adds.
MAIN_THREAD_LUA = r"""
local api, ghost = vim.api, require('local_copilot.ghost')
local show, set_extmark = ghost.show, api.nvim_buf_set_extmark
LCM = {}
function LCM.burst(keys, interval_ms)
  local i, timer = 0, vim.uv.new_timer()
  timer:start(0, interval_ms, function()
    i = i + 1
    if i > #keys then timer:stop(); timer:close(); return end
    api.nvim_input(keys[i])
  end)
end
function LCM.variant(v)
  api.nvim_buf_set_extmark, ghost.show = set_extmark, show
  LEAN.on = v == 'lean floor'
  require('local_copilot')[(v == 'off' or LEAN.on) and 'disable' or 'enable']()
  if v == 'plans dropped' then
    ghost.show = function() return false end
  elseif v == 'no extmark' then
    api.nvim_buf_set_extmark = function() return 1 end
  end
end
"""
# plugin off; on, but each render plan dropped as it arrives; on, but ghost.show's extmark not
# placed (nothing for Neovim to redraw); on; off, with the leanest Neovim side of per-key
# suggestions instead (bench/floor.py, LEAN_NVIM_LUA): the floor
MAIN_THREAD_VARIANTS = ("on", "off", "plans dropped", "no extmark", "lean floor")


def main_thread_added(server: Any, env: dict[str, str], nvim_bin: str, manifest: Path, workdir: Path,
                      rounds: int) -> dict[str, Any]:
    """(i): Neovim's main thread CPU per key over whole bursts, plugin on vs off (interleaved;
    the defaults), and the variants that split the difference: requests and plan messages,
    ghost.show's own work, Neovim's redraw of the ghost text; and the floor under all of it, the
    leanest Neovim side in the plugin's place (bench/floor.py). Fixed waits instead of polling: a
    poll is RPC work on that very thread."""
    setup = {"backends": {"llama.cpp": {"url": server.url}}, **PROFILES["defaults"]}
    nvim = H._start_nvim(nvim_bin, manifest, env, setup=setup, columns=120, lines=40)
    per_key: dict[str, list[float]] = {v: [] for v in MAIN_THREAD_VARIANTS}
    typed = dict.fromkeys(MAIN_THREAD_VARIANTS, 0)  # keys per variant, warm-up included
    lean = None
    try:
        lean = floor.LeanNvimSide(nvim, server.url, workdir)
        nvim.exec_lua(MAIN_THREAD_LUA)
        _typing_in_sample(nvim, server, workdir / "sample_main.py")
        pid = int(nvim.exec_lua("return vim.fn.getpid()"))  # its main thread's id is the pid
        n = len(MAIN_THREAD_VARIANTS)
        for i in range(n * (rounds + 1)):
            v = MAIN_THREAD_VARIANTS[i % n]
            nvim.exec_lua("LCM.variant(...)", v)
            nvim.input("<CR>")
            time.sleep(1.0)  # the new line's suggestion and its continuation are done
            text = BURSTS[i % len(BURSTS)]
            c0 = _thread_cpu_ns(pid, pid)
            nvim.exec_lua("LCM.burst(...)", list(text), INTERVAL_MS)
            typed[v] += len(text)
            # the burst, then the pause, the continuation and its draw (~0.4 s after the last key)
            time.sleep(len(text) * INTERVAL_MS / 1000 + 1.0)
            c1 = _thread_cpu_ns(pid, pid)
            if i >= n:  # one warm-up round
                per_key[v].append((c1 - c0) / len(text) / 1e6)
        nvim.exec_lua("LCM.variant('on')")
        floor_drawn = int(nvim.exec_lua("return LEAN.drawn"))  # the suggestions the floor drew
        # the yardstick: one message to Neovim that does nothing, after 90 ms idle (a render
        # plan is one such message, plus its work)
        c0 = _thread_cpu_ns(pid, pid)
        for _ in range(20):
            nvim.exec_lua("return", async_=True)
            time.sleep(0.09)
        message_us = (_thread_cpu_ns(pid, pid) - c0) / 20 / 1000
    finally:
        nvim.close()
        if lean is not None:
            lean.close()
    med = {v: statistics.median(per_key[v]) for v in MAIN_THREAD_VARIANTS}
    return {
        "on_ms": med["on"], "off_ms": med["off"], "added_ms": med["on"] - med["off"],
        "split_ms": {"requests and plan messages": med["plans dropped"] - med["off"],
                     "ghost.show": med["no extmark"] - med["plans dropped"],
                     "redraw of the ghost text": med["on"] - med["no extmark"]},
        "one_message_us": message_us,
        "floor_added_ms": med["lean floor"] - med["off"], "floor_keys": typed["lean floor"], "floor_drawn": floor_drawn,
        "on": per_key["on"], "off": per_key["off"], "per_key": per_key,
    }


def _settings(opts: dict[str, Any]) -> dict[str, Any]:
    """The options a profile ran with: the plugin's own defaults, then the profile's."""
    defaults = load_config({})
    keys = ("debounce_ms", "adaptive_debounce", "n_predict", "n_predict_first")
    # speculative = None means on for a server on this machine, which the bench's is
    return {**{k: getattr(defaults, k) for k in keys}, "speculative": defaults.speculate, **opts}


def _by_callback(samples: list[dict[str, Any]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for s in samples:
        for k, v in s["main_thread_by_callback_ms"].items():
            total[k] = total.get(k, 0.0) + v
    keys = len(samples) * KEYS_PER_BURST or 1
    return {k: round(v / keys, 4) for k, v in sorted(total.items())}


# ------------------------------------------------------------------------------ (e) snapshot cost


def snapshot_cost(server: Any, env: dict[str, str], nvim_bin: str, manifest: Path, workdir: Path,
                  reps: int) -> dict[str, Any]:
    """trigger() in Neovim + the host's decode and window fit, 1,000 vs 100,000 lines."""
    setup = {"backends": {"llama.cpp": {"url": server.url}}, "auto_trigger": False}
    nvim = H.start_nvim(nvim_bin, manifest, env, setup)
    out: dict[str, Any] = {}
    try:
        # the plugin turns itself off above 1 MiB (config.lua max_file_bytes); 100,000 lines of
        # real code are ~3.5 MB, so lift the limit here to measure the path that does the work
        nvim.exec_lua("require('local_copilot.config').max_file_bytes = math.huge")
        bufs = {}
        for n in (1_000, 100_000):
            path = workdir / f"big_{n}.py"
            path.write_text("\n".join(sample_source(n)) + "\n")
            nvim.command(f"edit {path}")
            bufs[n] = nvim.current.buffer.number
        nvim.command(f"buffer {bufs[1_000]}")
        nvim.input("A")  # insert mode; starts the host on the first trigger below
        nvim.exec_lua("LCB.time_trigger(1)")
        H.wait_for(lambda: nvim.exec_lua(host_start.HOST_PID) > 0, timeout=60)  # the host runs
        est = TokenEstimator()
        share = load_config({}).context.prefix_share
        budget = 4096 - N_PREDICT - 48 - 1024 // 3  # n_ctx - n_predict - overhead - extra share
        lua_ns: dict[int, list[float]] = {1_000: [], 100_000: []}
        py_ns: dict[int, list[float]] = {1_000: [], 100_000: []}
        for _ in range(5):  # interleaved rounds: noise hits both sizes alike
            for n in (1_000, 100_000):
                nvim.command("stopinsert")
                nvim.command(f"buffer {bufs[n]}")
                nvim.command(f"call cursor({n // 2}, 1)")
                nvim.input("A")
                H.wait_for(lambda: nvim.api.get_mode()["mode"] == "i", timeout=10)
                lua_ns[n] += nvim.exec_lua("return LCB.time_trigger(...)", reps // 5)
                raw = nvim.exec_lua("return LCB.last_snap")
                raw.pop("config", None)
                for _ in range(reps // 5):
                    fitter = WindowFitter()  # a new place: nothing of the window known yet
                    t0 = time.perf_counter_ns()
                    msg = protocol.decode("snapshot", raw)
                    assert isinstance(msg, protocol.SnapshotMsg) and msg.lines is not None
                    snap = protocol.to_snapshot(msg, msg.lines)
                    fitter.fit(snap, lines_before=200, lines_after=60, budget=budget, est=est, prefix_share=share)
                    py_ns[n].append(time.perf_counter_ns() - t0)
    finally:
        nvim.close()
    for n in (1_000, 100_000):
        lua_us, py_us = statistics.median(lua_ns[n]) / 1000, statistics.median(py_ns[n]) / 1000
        out[str(n)] = {"lua_snapshot_us": lua_us, "python_prompt_us": py_us, "total_us": lua_us + py_us}
    out["ratio"] = out["100000"]["total_us"] / out["1000"]["total_us"]
    return out


# ------------------------------------------------------------------------------ (f) startup


def startup_cost(nvim_bin: str, manifest: Path, workdir: Path, runs: int) -> dict[str, Any]:
    """`nvim --startuptime` with the plugin installed as users do (a pack/*/start directory and
    the :UpdateRemotePlugins manifest) and without it; interleaved runs, medians."""
    base = workdir / "startup"
    with_data, without_data = base / "with" / "data", base / "without" / "data"
    pack = with_data / "nvim" / "site" / "pack" / "bench" / "start"
    pack.mkdir(parents=True, exist_ok=True)
    without_data.mkdir(parents=True, exist_ok=True)
    link = pack / "local-copilot.nvim"
    if not link.exists():
        link.symlink_to(H.REPO, target_is_directory=True)
    cfg = base / "config"
    cfg.mkdir(parents=True, exist_ok=True)
    times: dict[str, list[float]] = {"with": [], "without": []}
    for i in range(runs * 2):
        which = "with" if i % 2 == 0 else "without"
        log_file = base / f"startup-{which}.log"
        log_file.unlink(missing_ok=True)
        env = dict(os.environ, XDG_CONFIG_HOME=str(cfg), XDG_DATA_HOME=str(with_data if which == "with" else without_data),
                   XDG_STATE_HOME=str(base / "state"),
                   NVIM_RPLUGIN_MANIFEST=str(manifest if which == "with" else base / "none.vim"))
        subprocess.run([nvim_bin, "--headless", "-n", "-i", "NONE", "--cmd", f"let g:local_copilot_python = '{sys.executable}'",
                        "--startuptime", str(log_file), "+qa!"], env=env, check=True, timeout=60, capture_output=True)
        lines = [ln for ln in log_file.read_text().splitlines() if "NVIM STARTED" in ln]
        times[which].append(float(lines[-1].split()[0]))
    added = statistics.median(times["with"]) - statistics.median(times["without"])
    # the plugin's own files, from a run with it installed
    own = [ln for ln in (base / "startup-with.log").read_text().splitlines() if "local_copilot" in ln or "rplugin" in ln]
    return {"runs": runs, "with_ms": statistics.median(times["with"]), "without_ms": statistics.median(times["without"]),
            "added_ms": added, "plugin_lines": own}


def recorder_cost(nvim_bin: str) -> dict[str, Any]:
    """The edit recorder's main-thread cost per change (bench/next_edit_recorder.lua): typing,
    and every change far from the last."""
    out: dict[str, Any] = {}
    for name, jumpy in (("typing", "0"), ("far", "1")):
        env = dict(os.environ, JUMPY=jumpy, RECORDER_JSON="1")
        res = subprocess.run([nvim_bin, "--clean", "--headless", "--cmd", f"set rtp^={H.REPO}",
                              "-l", str(H.REPO / "bench" / "next_edit_recorder.lua")],
                             env=env, capture_output=True, text=True, timeout=300, check=True)
        # nvim -l prints to stderr
        out[name] = json.loads((res.stdout + res.stderr).strip().splitlines()[-1])
    return out


# ------------------------------------------------------------------------------ report


def budgets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def row(what: str, budget: str, value: str, ok: bool, profile: str = "") -> None:
        rows.append({"budget": what, "limit": budget, "measured": value, "pass": ok, "profile": profile})

    for name, p in doc["profiles"].items():
        lat = p["latency_ms"]
        row("last key -> ghost text (p50)", "<= 10 ms", f"{lat['p50']:.1f} ms", lat["p50"] <= 10, name)
        row("last key -> ghost text (p90)", "<= 25 ms", f"{lat['p90']:.1f} ms", lat["p90"] <= 25, name)
        tok = p["tokens_predicted_per_burst"]
        row("tokens generated / burst", f"<= {1.5 * N_PREDICT:.0f} (1.5 x n_predict)",
            f"{tok:.0f} ({tok / N_PREDICT:.2f} x)", tok <= 1.5 * N_PREDICT, name)
        pr, full = p["prompt_tokens_per_burst"], p["full_prompt_tokens"]
        row("prompt tokens evaluated / burst", f"<= {2 * full:.0f} (2 x {full:.0f})",
            f"{pr:.0f} ({pr / full:.2f} x)" if full else f"{pr:.0f}", bool(full) and pr <= 2 * full, name)
        mt = p["main_thread_ms_per_key"]
        row("Neovim main thread / key (p50)", "<= 0.2 ms", f"{mt['p50']:.3f} ms (mean {mt['mean']:.3f})",
            mt["p50"] <= 0.2, name)
        mc = p["main_thread_cpu_ms_per_key"]
        row("Neovim main thread CPU / key (p50)", "<= 0.2 ms", f"{mc['p50']:.3f} ms (mean {mc['mean']:.3f})",
            mc["p50"] <= 0.2, name)
        cpu = p["host_cpu_ms_per_key"]
        row("Python host CPU / key", "<= 1 ms", f"{cpu['mean']:.2f} ms (p50 of bursts {cpu['p50']:.2f})",
            cpu["mean"] <= 1, name)
        row("Python host RSS", "<= 80 MB", f"{p['host_rss_mb']:.1f} MB", p["host_rss_mb"] <= 80, name)
    if "main_thread" in doc:
        m = doc["main_thread"]
        # the design's budget: the floor (the leanest Neovim side of a suggestion, same run) + 0.2 ms
        floor_ms = m.get("floor_added_ms")
        if floor_ms is None:
            row("Neovim main thread CPU added / key", "<= floor + 0.2 ms", "no floor measured", False, "defaults")
        else:
            row("Neovim main thread CPU added / key", "<= floor + 0.2 ms",
                f"{m['added_ms']:.3f} ms, floor {floor_ms:.3f} ms (whole thread: {m['on_ms']:.3f} on - "
                f"{m['off_ms']:.3f} off)", m["added_ms"] - floor_ms <= 0.2, "defaults")
    if "snapshot" in doc:
        s = doc["snapshot"]
        row("snapshot + prompt, 100k vs 1k lines", "<= 1.5 x",
            f"{s['ratio']:.2f} x ({s['1000']['total_us']:.0f} -> {s['100000']['total_us']:.0f} us)", s["ratio"] <= 1.5)
    if "startup" in doc:
        st = doc["startup"]
        row("added to nvim --startuptime", "<= 2 ms", f"{st['added_ms']:.2f} ms (median of {st['runs']})",
            st["added_ms"] <= 2)
    if "host_start" in doc:
        hs = doc["host_start"]
        floor_ms = hs["host_running_ms"]["max"]
        for key, what in (("first_insert_ms", "first Insert"), ("revival_ms", "revival after kill -9")):
            v = hs[key]
            row(f"main loop stall: host start at {what}", "<= 20 ms",
                f"{v['max']:.1f} ms worst of {hs['runs']} (median {v['median']:.1f}; host running: {floor_ms:.1f})",
                v["max"] <= 20)
        v = hs["python_without_pynvim_ms"]
        row("main loop stall: first keys, python without pynvim", "<= 20 ms",
            f"{v['max']:.1f} ms worst of {hs['runs']} (median {v['median']:.1f})", v["max"] <= 20)
    if "recorder" in doc:
        r = doc["recorder"]
        typing, far = r["typing"]["per_change_us"], r["far"]["per_change_us"]
        row("next edits: main thread / recorded change (p50)", "<= 0.05 ms",
            f"{typing / 1000:.4f} ms typing, {far / 1000:.4f} ms far apart", max(typing, far) <= 50)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = ("budget", "limit", "measured", "", "settings")
    body = [(r["budget"], r["limit"], r["measured"], "PASS" if r["pass"] else "FAIL", r["profile"]) for r in rows]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*b) for b in body]
    return "\n".join(ln.rstrip() for ln in lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bursts", type=int, default=20, help="measured typing bursts per profile")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--profiles", default=",".join(PROFILES), help="comma-separated, from: " + ", ".join(PROFILES))
    ap.add_argument("--reps", type=int, default=200, help="snapshot timings per buffer size")
    ap.add_argument("--startup-runs", type=int, default=15)
    ap.add_argument("--host-start-runs", type=int, default=5)
    ap.add_argument("--wakeups", type=int, default=100, help="messages per wakeup yardstick (4 of them)")
    ap.add_argument("--floor-bursts", type=int, default=12, help="typing bursts of the floor yardstick")
    ap.add_argument("--skip", default="",
                    help="comma-separated parts to skip: bursts,mainthread,snapshot,startup,hoststart,wakeup,floor,recorder")
    ap.add_argument("--out", type=Path, default=None, help="JSON file (default bench/results/bench-TIME.json)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a budget is missed (default: report only)")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))

    nvim_bin = H.nvim_binary()
    doc: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "nvim": subprocess.run([nvim_bin, "--version"], capture_output=True, text=True).stdout.split("\n")[0]},
        "typing": {"keys_per_burst": KEYS_PER_BURST, "interval_ms": INTERVAL_MS, "n_predict": N_PREDICT},
        "profiles": {},
    }
    with tempfile.TemporaryDirectory(prefix="lc-bench-") as tmp:
        workdir = Path(tmp)
        manifest = H.make_manifest(nvim_bin, workdir)
        env = H.nvim_env(workdir, manifest)
        # only these parts need the server
        needs_server = bool({"bursts", "mainthread", "floor", "snapshot", "hoststart"} - skip)
        if needs_server:
            log("starting the tiny llama-server ...")
        with H.tiny_server(workdir, "--slots") if needs_server else contextlib.nullcontext() as server:
            if "bursts" not in skip:
                for name in [p.strip() for p in args.profiles.split(",") if p.strip()]:
                    log(f"typing bursts, settings: {name} {PROFILES[name]}")
                    try:
                        doc["profiles"][name] = run_profile(name, PROFILES[name], server,
                                                            {**env, **PROFILE_ENV.get(name, {})}, nvim_bin, manifest,
                                                            workdir, args.bursts, args.warmup)
                    except Exception as exc:  # report it and measure the rest
                        doc.setdefault("errors", []).append(f"profile {name}: {exc!r}")
                        log(f"  {name} failed: {exc!r}")
            if "mainthread" not in skip:
                log("Neovim main thread CPU, whole thread, plugin on vs off ...")
                try:
                    doc["main_thread"] = main_thread_added(server, env, nvim_bin, manifest, workdir,
                                                           max(2, args.bursts // 3))
                except Exception as exc:
                    doc.setdefault("errors", []).append(f"main thread: {exc!r}")
                    log(f"  main thread failed: {exc!r}")
            if "floor" not in skip:
                log("the leanest Python loop for a keystroke's I/O (the floor) ...")
                try:
                    doc["floor"] = floor.lean_host_ms_per_key(server.url, sample_source(400), args.floor_bursts)
                except Exception as exc:
                    doc.setdefault("errors", []).append(f"floor: {exc!r}")
                    log(f"  floor failed: {exc!r}")
            if "hoststart" not in skip:
                log("main loop stall while the Python host starts and revives ...")
                try:
                    doc["host_start"] = host_start.measure(nvim_bin, manifest, env, server.url, workdir,
                                                           args.host_start_runs)
                except Exception as exc:
                    doc.setdefault("errors", []).append(f"host start: {exc!r}")
                    log(f"  host start failed: {exc!r}")
            if "snapshot" not in skip:
                log("snapshot + prompt cost, 1,000 vs 100,000 lines ...")
                try:
                    doc["snapshot"] = snapshot_cost(server, env, nvim_bin, manifest, workdir, args.reps)
                except Exception as exc:
                    doc.setdefault("errors", []).append(f"snapshot: {exc!r}")
                    log(f"  snapshot failed: {exc!r}")
        if "startup" not in skip:
            log("startup time ...")
            try:
                doc["startup"] = startup_cost(nvim_bin, manifest, workdir, args.startup_runs)
            except Exception as exc:
                doc.setdefault("errors", []).append(f"startup: {exc!r}")
                log(f"  startup failed: {exc!r}")
    if "recorder" not in skip:
        log("next edits: the edit recorder's main-thread cost per change ...")
        try:
            doc["recorder"] = recorder_cost(nvim_bin)
        except Exception as exc:
            doc.setdefault("errors", []).append(f"recorder: {exc!r}")
            log(f"  recorder failed: {exc!r}")
    if "wakeup" not in skip:  # nothing else running: the machine's own cost
        log("one Python wakeup's CPU after 1 and 90 ms idle ...")
        doc["wakeup"] = wakeup.calibrate(args.wakeups)
        doc["cold_work"] = wakeup.cold_work_us(sample_source(400), max(3, args.wakeups // 3))
    doc["budgets"] = budgets(doc)
    print(table(doc["budgets"]))
    for err in doc.get("errors", []):
        print(f"NOT MEASURED: {err}")
    for name, p in doc["profiles"].items():
        print(f"\n[{name}] main thread per key by callback (ms): {p['main_thread_by_callback_ms_per_key']};"
              f" one trigger() p50 {p['trigger_us']['p50']:.0f} us, p90 {p['trigger_us']['p90']:.0f} us")
        print(f"[{name}] host CPU per token the server streamed: {p['host_cpu_us_per_token']:.0f} us")
        print(f"[{name}] one key typed after a pause -> ghost text: p50 {p['after_pause_latency_ms']['p50']:.1f} ms")
        print(f"[{name}] host counters: {p['host_counters']}; after the bursts: {p['host_state_after']}")
    if "main_thread" in doc:
        m = doc["main_thread"]
        print(f"\nNeovim main thread CPU per key over whole bursts (ms), plugin on: {[round(x, 3) for x in m['on']]};"
              f" off: {[round(x, 3) for x in m['off']]}")
        split = ", ".join(f"{k} {v:.3f}" for k, v in m["split_ms"].items())
        print(f"  what the plugin adds, by variant (ms per key): {split};"
              f" one message to Neovim doing nothing costs it {m['one_message_us']:.0f} us after 90 ms idle")
        if "floor_added_ms" in m:
            print(f"  the floor: the leanest Neovim side of a suggestion per key (bench/floor.py) adds"
                  f" {m['floor_added_ms']:.3f} ms per key (it drew {m['floor_drawn']} suggestions for {m['floor_keys']}"
                  f" keys); the plugin adds {m['added_ms'] - m['floor_added_ms']:.3f} ms above it")
    if "snapshot" in doc:
        s = doc["snapshot"]
        print(f"\nsnapshot (us): 1k lines lua {s['1000']['lua_snapshot_us']:.0f} + python {s['1000']['python_prompt_us']:.0f};"
              f" 100k lines lua {s['100000']['lua_snapshot_us']:.0f} + python {s['100000']['python_prompt_us']:.0f}")
    if "startup" in doc:
        st = doc["startup"]
        print(f"startup (ms): with {st['with_ms']:.2f}, without {st['without_ms']:.2f}")
    if "wakeup" in doc:
        w = doc["wakeup"]
        print(f"this machine, one wakeup of a Python thread reading a message (CPU, us): asyncio"
              f" {w['asyncio_after_1ms_us']:.0f} after 1 ms idle, {w['asyncio_after_90ms_us']:.0f} after 90 ms;"
              f" blocking recv() {w['blocking_after_1ms_us']:.0f} / {w['blocking_after_90ms_us']:.0f}")
        for step, c in doc.get("cold_work", {}).items():
            print(f"  {step} (host work per key): {c['warm_us']:.0f} us warm, {c['first_after_90ms_us']:.0f} us as the"
                  f" first call after 90 ms idle, {c['second_us']:.0f} us right after that")
        for name, p in doc["profiles"].items():
            per_key = p["host_cpu_ms_per_key"]["mean"] * 1000
            print(f"[{name}] host CPU per key = {per_key / w['asyncio_after_90ms_us']:.1f} asyncio wakeups after"
                  " 90 ms idle (the host wakes at least twice per key: the snapshot, the answer)")
    if "floor" in doc:
        f = doc["floor"]
        print(f"the floor: the leanest Python loop doing a keystroke's I/O (bench/floor.py) uses"
              f" {f['host_cpu_ms_per_key']:.2f} ms CPU per key (bursts {f['spread_ms'][0]:.2f}-{f['spread_ms'][1]:.2f},"
              f" prompt {f['prompt_tokens']} tokens)")
        for name, p in doc["profiles"].items():
            print(f"[{name}] host CPU per key = {p['host_cpu_ms_per_key']['mean'] / f['host_cpu_ms_per_key']:.1f} x the floor")
    out = args.out or RESULTS / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, default=str))
    if out.parent == RESULTS:
        (RESULTS / "latest.json").write_text(json.dumps(doc, indent=1, default=str))
    print(f"\nwrote {out}")
    failed = [r["budget"] + (f" [{r['profile']}]" if r["profile"] else "") for r in doc["budgets"] if not r["pass"]]
    if failed:
        print(f"{len(failed)} budget(s) missed")
    return 1 if (args.strict and failed) or doc.get("errors") else 0


if __name__ == "__main__":
    sys.exit(main())
