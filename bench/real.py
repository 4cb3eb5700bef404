"""The realistic profile: what a user feels on a real-size model, not the plugin's own overhead.

    python bench/real.py [--bursts 12] [--compare /path/to/other/checkout] [--plugin-root PATH]
    make bench-real

A llama-server runs a random-weight model with Qwen2.5-Coder-0.5B's exact compute shape
(python/local_copilot/devtools/real_shape_model.py; generated once, ~530 MB, cached), where
the server's prompt evaluation is the cost. The plugin types in a real headless Neovim, in two
standard-library modules, bursts of 8 keys at 90 ms/key at positions that move as a user's do:
the next line, a few lines down, another function, back to an earlier place, another buffer.
Before each burst the cursor rests at the new place in Normal mode (REST_S), then `o` opens a
line and 7 characters follow.

Per burst: last key -> ghost text for that text (timed in Neovim, bench/instrument.lua), the
server's prompt tokens evaluated and tokens generated (--metrics deltas), the plugin's requests
(its stats), and the server's measured prompt and generation speeds over the burst.

With --compare, a second checkout's python/ and lua/ (e.g. `git archive main | tar -x -C DIR`)
run the same bursts against its own server (same flags, same model), interleaved burst by
burst with this checkout's, so both see the same machine load: the before/after table of one
run. The floor is measured on each server at the start and the end: the same short request
twice, the second answered from the cache.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
import pynvim  # noqa: E402

import harness as H  # noqa: E402
from local_copilot.devtools.real_shape_model import ensure_model  # noqa: E402
from local_copilot.servers.llama_cpp import LlamaServer  # noqa: E402
from local_copilot.servers.options import ServerOptions  # noqa: E402
from local_copilot.servers.recipes import find_llama_server  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
INTERVAL_MS = 90
REST_S = 0.6  # the cursor rests at the new place before `o` (a user finds the spot, then types)
# 7 characters after `o`: code-like, never the model's text
TEXTS = ["x = 1; ", "total =", "if a >", "return ", "for i i", "name = ", "count +", "print(s",
         "data = ", "yield i", "args = ", "result ", "key = k", "self.na", "raise V", "path = "]
MODULES = ("argparse.py", "textwrap.py")
# on top of the users' recipe (servers/recipes.py): --slots, the endpoint the bench polls until
# the server is idle; --no-repack: this machine's AMX repacking of Q8_0 weights crashes llama-server (SIGILL/SIGSEGV
# in the warm-up run), so the bench turns it off (it changes nothing of the prompt cache)
SERVER_FLAGS = ["--slots", "--no-repack"]


log, pct = H.log, H.pct


def moves(n: int, seed: int, sizes: dict[int, int]) -> list[tuple[str, int, int]]:
    """(kind, buffer index, row) for `n` bursts: rows in lines of the files as they are (rows
    shift as typed lines are added; the runner adds them)."""
    rng = random.Random(seed)
    kinds = ["next line", "a few lines down", "another function", "back to an earlier place", "another buffer"]
    out: list[tuple[str, int, int]] = []
    buf, row = 0, sizes[0] // 3
    history: list[tuple[int, int]] = []
    for i in range(n):
        kind = "a few lines down" if i == 0 else kinds[(i - 1) % len(kinds)]
        if kind == "next line":
            row += 1
        elif kind == "a few lines down":
            row += rng.randint(3, 8)
        elif kind == "another function":
            row += rng.choice([-1, 1]) * rng.randint(80, 200)
        elif kind == "back to an earlier place" and len(history) >= 2:
            buf, row = history[-rng.randint(2, min(4, len(history)))]
        elif kind == "another buffer":
            buf = 1 - buf
            row = rng.randint(sizes[buf] // 5, sizes[buf] * 4 // 5)
        row = max(20, min(sizes[buf] - 20, row))
        history.append((buf, row))
        out.append((kind, buf, row))
    return out


def register(nvim_bin: str, root: Path, manifest: Path) -> Path:
    """:UpdateRemotePlugins for the checkout at `root`, into `manifest`."""
    manifest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([nvim_bin, "--clean", "--headless", "-n", "--cmd", f"set rtp^={root}",
                    "--cmd", f"let g:python3_host_prog = '{sys.executable}'",
                    "-c", f"let g:loaded_remote_plugins = '{manifest}'", "-c", "UpdateRemotePlugins", "-c", "qa!"],
                   env=dict(os.environ, NVIM_RPLUGIN_MANIFEST=str(manifest)), capture_output=True, timeout=120,
                   check=False)
    if "LocalCopilotEvent" not in (manifest.read_text() if manifest.exists() else ""):
        raise SystemExit(f":UpdateRemotePlugins did not register the plugin of {root}")
    return manifest


def start_nvim(nvim_bin: str, root: Path, manifest: Path, env: dict[str, str], setup: dict[str, Any]) -> pynvim.Nvim:
    argv = [nvim_bin, "--clean", "--embed", "--headless", "-n", "--cmd", f"set rtp^={root}",
            "--cmd", f"let g:python3_host_prog = '{sys.executable}'", "--cmd", "set columns=120 lines=40"]
    nvim = H.attach_child(argv, env)
    nvim.command(f"let g:loaded_remote_plugins = '{manifest}'")
    nvim.command(f"source {manifest}")
    nvim.command("set autoindent expandtab shiftwidth=4")
    nvim.exec_lua("require('local_copilot').setup(...)", setup)
    nvim.exec_lua(H.INSTRUMENT.read_text())
    return nvim


class Variant:
    """One checkout of the plugin, its own server and its own Neovim."""

    def __init__(self, label: str, root: Path, server: LlamaServer, nvim: pynvim.Nvim, files: list[Path]) -> None:
        self.label, self.root, self.server, self.nvim, self.files = label, root, server, nvim, files
        self.samples: list[dict[str, Any]] = []
        self.added = [0, 0]  # lines typed into each buffer so far (rows below shift down)
        self.placed: dict[int, list[int]] = {0: [], 1: []}  # where lines were opened, per buffer

    def counters(self) -> dict[str, int]:
        try:
            return dict(self.nvim.call("LocalCopilotCall", "status")["stats"]["counters"])
        except Exception:  # the host not started yet
            return {}

    def ghost_now(self) -> bool:
        return bool(self.nvim.exec_lua(
            "local g = require('local_copilot.ghost')\n"
            "return g.current ~= nil and g.current.tick == vim.api.nvim_buf_get_changedtick(0) and g.text() ~= ''"))

    def settle(self, timeout: float = 90.0) -> None:
        H.settle(self.nvim, self.server.url, timeout)

    def row_now(self, buf: int, row: int) -> int:
        """A row of the original file, in the buffer as it is now (lines typed above push it down)."""
        return row + sum(1 for r in self.placed[buf] if r < row)

    def burst(self, kind: str, buf: int, row: int, text: str) -> dict[str, Any]:
        nvim = self.nvim
        nvim.input("<Esc>")
        H.wait_for(lambda: nvim.api.get_mode()["mode"] == "n", timeout=10, what="Normal mode")
        # counted from before the move: a warm-up while the cursor rests is part of the burst
        m0, c0 = H.metrics(self.server.url), self.counters()
        nvim.command(f"buffer {self.files[buf]}")
        target = self.row_now(buf, row)
        nvim.input(f"{target}G")  # typed, as a user moves: CursorMoved runs as it does for them
        H.wait_for(lambda: nvim.current.window.cursor[0] == target, timeout=10, what="the cursor moved")
        time.sleep(REST_S)  # the user's pause at the new place (what a warm-up may use)
        keys = ["o", *text]
        nvim.exec_lua("LCB.burst(...)", keys, INTERVAL_MS)
        H.wait_for(lambda: nvim.exec_lua("return LCB.done"), timeout=20, what="the burst typed")
        got = True
        try:
            H.wait_for(self.ghost_now, timeout=60, what="a suggestion after the burst")
        except AssertionError:
            got = False
        self.settle()
        m1, c1 = H.metrics(self.server.url), self.counters()
        res = nvim.exec_lua("return LCB.result()")
        nvim.exec_lua("LCB.stop()")
        self.placed[buf].append(row)
        last = res["keys"][-1]
        draws = [d for d in res["draws"] if d["tick"] == res["tick"] and d["t"] >= last]
        d = {k: m1.get(k, 0) - m0.get(k, 0) for k in m1}
        pt, ps = d.get("llamacpp:prompt_tokens_total", 0), d.get("llamacpp:prompt_seconds_total", 0)
        gt, gs = d.get("llamacpp:tokens_predicted_total", 0), d.get("llamacpp:tokens_predicted_seconds_total", 0)
        sample = {
            "move": kind, "buffer": buf, "row": row, "text": text,
            "latency_ms": (draws[0]["t"] - last) / 1e6 if draws and got else None,
            "prompt_tokens": pt, "tokens_generated": gt,
            "prompt_tps": pt / ps if ps else None, "gen_tps": gt / gs if gs else None,
            "requests": c1.get("requests", 0) - c0.get("requests", 0),
            "warmups": c1.get("warmups", 0) - c0.get("warmups", 0),
        }
        self.samples.append(sample)
        return sample


# A peer plugin's Neovim: the same typer as bench/instrument.lua, its ghost text timed where it
# is drawn (nvim_buf_set_extmark in its namespace), its requests counted where they start (curl
# through vim.system). Written for minuet-ai.nvim's virtualtext frontend.
PEER_LUA = r"""
local api, hr = vim.api, vim.uv.hrtime
local ns = api.nvim_create_namespace(...)
local B = { keys = {}, draws = {}, requests = 0, recording = false }
_G.LCB = B
local set_extmark = api.nvim_buf_set_extmark
api.nvim_buf_set_extmark = function(buf, id, ...)
  local r = set_extmark(buf, id, ...)
  if id == ns and B.recording then
    B.draws[#B.draws + 1] = { t = hr(), tick = api.nvim_buf_get_changedtick(buf == 0 and api.nvim_get_current_buf() or buf) }
  end
  return r
end
local system = vim.system
vim.system = function(cmd, ...)
  if type(cmd) == 'table' and cmd[1] == 'curl' then B.requests = B.requests + 1 end
  return system(cmd, ...)
end
function B.burst(keys, interval_ms)
  B.keys, B.draws, B.done, B.recording = {}, {}, false, true
  local i, timer = 0, vim.uv.new_timer()
  timer:start(0, interval_ms, function()
    i = i + 1
    if i > #keys then timer:stop(); timer:close(); B.done = true; return end
    B.keys[i] = hr()
    api.nvim_input(keys[i])
  end)
end
function B.result() return { keys = B.keys, draws = B.draws, tick = api.nvim_buf_get_changedtick(0), done = B.done } end
function B.stop() B.recording = false end
function B.ghost_now()
  local d = B.draws[#B.draws]
  return #api.nvim_buf_get_extmarks(0, ns, 0, -1, { limit = 1 }) > 0 and d ~= nil
    and d.tick == api.nvim_buf_get_changedtick(0)
end
return true
"""

# minuet's settings for a local llama-server, from its README ("context_window = 512" as it
# advises to start with; max_tokens 56; one completion); everything else its defaults
MINUET_SETUP = r"""
local url = ...
require('minuet').setup({
  provider = 'openai_fim_compatible',
  n_completions = 1,
  context_window = 512,
  virtualtext = { auto_trigger_ft = { '*' } },
  provider_options = {
    openai_fim_compatible = {
      api_key = 'TERM', name = 'Llama.cpp', end_point = url .. '/v1/completions', model = 'PLACEHOLDER',
      optional = { max_tokens = 56, top_p = 0.9 },
      template = {
        prompt = function(before, after, _)
          return '<|fim_prefix|>' .. before .. '<|fim_suffix|>' .. after .. '<|fim_middle|>'
        end,
        suffix = false,
      },
    },
  },
})
"""


def start_peer(nvim_bin: str, root: Path, env: dict[str, str], url: str) -> pynvim.Nvim:
    argv = [nvim_bin, "--clean", "--embed", "--headless", "-n", "--cmd", f"set rtp^={root}",
            "--cmd", "set columns=120 lines=40"]
    nvim = H.attach_child(argv, env)
    nvim.command("set autoindent expandtab shiftwidth=4")
    nvim.exec_lua(PEER_LUA, "minuet.virtualtext")
    nvim.exec_lua(MINUET_SETUP, url)
    return nvim


class PeerVariant(Variant):
    """A peer plugin (minuet) in its own Neovim against its own server."""

    def counters(self) -> dict[str, int]:
        return {"requests": int(self.nvim.exec_lua("return LCB.requests"))}

    def ghost_now(self) -> bool:
        return bool(self.nvim.exec_lua("return LCB.ghost_now()"))

    def settle(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        idle = 0
        while idle < 3:
            if time.monotonic() > deadline:
                raise TimeoutError("the server did not go idle")
            slots = httpx.get(self.server.url + "/slots", timeout=5, trust_env=False).json()
            idle = idle + 1 if not any(s.get("is_processing") for s in slots) else 0
            time.sleep(0.05)


def floor_ms(url: str, reps: int = 3) -> dict[str, float]:
    """The same 6-token request with its prompt already cached: the fastest a suggestion gets."""
    src = (Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_text()
    body = {"prompt": "<|fim_prefix|>" + src[:2500] + "<|fim_suffix|>" + src[2500:3000] + "<|fim_middle|>",
            "n_predict": 6, "temperature": 0.1, "cache_prompt": True, "samplers": ["top_k", "top_p", "temperature"]}
    httpx.post(url + "/completion", json=body, timeout=120, trust_env=False)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        httpx.post(url + "/completion", json=body, timeout=120, trust_env=False)
        times.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": statistics.median(times), "min_ms": min(times)}


def summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    lat = [s["latency_ms"] for s in samples if s["latency_ms"] is not None]
    med = lambda key: statistics.median([s[key] for s in samples if s[key] is not None] or [float("nan")])  # noqa: E731
    return {
        "bursts": len(samples), "missing": sum(1 for s in samples if s["latency_ms"] is None),
        "p50_ms": pct(lat, 50), "p90_ms": pct(lat, 90),
        "prompt_tokens_per_burst": statistics.fmean(s["prompt_tokens"] for s in samples),
        "tokens_generated_per_burst": statistics.fmean(s["tokens_generated"] for s in samples),
        "requests_per_burst": statistics.fmean(s["requests"] for s in samples),
        "warmups_per_burst": statistics.fmean(s["warmups"] for s in samples),
        "prompt_tps": med("prompt_tps"), "gen_tps": med("gen_tps"),
    }


def table(doc: dict[str, Any]) -> str:
    labels = list(doc["variants"])
    rows = [
        ("last key -> ghost text p50", lambda v: f"{v['p50_ms']:.0f} ms"),
        ("p90", lambda v: f"{v['p90_ms']:.0f} ms"),
        ("prompt tokens evaluated / burst", lambda v: f"{v['prompt_tokens_per_burst']:.0f}"),
        ("tokens generated / burst", lambda v: f"{v['tokens_generated_per_burst']:.0f}"),
        ("requests / burst", lambda v: f"{v['requests_per_burst']:.1f}"),
        ("warm-ups / burst", lambda v: f"{v['warmups_per_burst']:.1f}"),
        ("bursts without a suggestion", lambda v: f"{v['missing']} of {v['bursts']}"),
        ("server prompt tokens/s (median)", lambda v: f"{v['prompt_tps']:.0f}"),
        ("server generated tokens/s (median)", lambda v: f"{v['gen_tps']:.0f}"),
        ("floor: cached 6-token request", lambda v: f"{v['floor_ms']:.0f} ms"),
    ]
    head = ["", *labels]
    body = [[name, *(fmt(doc["variants"][lb]["summary"]) for lb in labels)] for name, fmt in rows]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, body)])


def verdicts(doc: dict[str, Any]) -> list[str]:
    """The design's real-size budgets for the measured checkout (the first variant)."""
    label = next(iter(doc["variants"]))
    v = doc["variants"][label]
    s = v["summary"]
    rows = [("last key -> ghost text p50 <= 600 ms", f"{s['p50_ms']:.0f} ms", s["p50_ms"] <= 600),
            ("last key -> ghost text p90 <= 1.5 s", f"{s['p90_ms']:.0f} ms", s["p90_ms"] <= 1500)]
    if "minuet" in doc["variants"]:
        m = doc["variants"]["minuet"]["summary"]["p50_ms"]
        rows.append(("p50 at least 4 x sooner than minuet's", f"{m / s['p50_ms']:.1f} x", m >= 4 * s["p50_ms"]))
    stats = v.get("stats")
    ctx = (stats.get("sizing") or {}).get("context") or {} if isinstance(stats, dict) else {}
    if ctx.get("chars"):
        rows.append(("context around the cursor >= 512 characters", f"{ctx['chars']} characters ({ctx.get('lines_before')}"
                     f" lines above, {ctx.get('window_tokens')} tokens)", ctx["chars"] >= 512))
    return [f"{'PASS' if ok else 'FAIL'}  {what}: {value}" for what, value, ok in rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bursts", type=int, default=12, help="measured bursts per checkout")
    ap.add_argument("--plugin-root", type=Path, default=H.REPO, help="the checkout measured (default: this one)")
    ap.add_argument("--compare", type=Path, action="append", default=[],
                    help="another checkout measured in the same run, burst by burst (e.g. the 'before')")
    ap.add_argument("--minuet", type=Path, default=None,
                    help="a minuet-ai.nvim checkout, measured in the same run with its README's settings for a local"
                         " llama-server (context_window 512)")
    ap.add_argument("--shape", default="qwen2.5-coder-0.5b")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=8192, help="tokens per slot (backends.NAME.server.context_tokens)")
    # one slot unless asked: the budgets compare with -np 1 (the users' recipe gives 2)
    ap.add_argument("--parallel", type=int, default=1, help="llama-server slots (backends.NAME.server.parallel)")
    ap.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                    help="one more llama-server argument, repeated for each (e.g. --server-arg=-ngl --server-arg=99 "
                         "on a GPU build)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    model = ensure_model(args.shape)
    binary = find_llama_server()
    if not binary:
        raise SystemExit("llama-server not found: run `make venv`")
    nvim_bin = H.nvim_binary()
    roots = [("this" if args.plugin_root == H.REPO else str(args.plugin_root), args.plugin_root.resolve())]
    roots += [(str(p), p.resolve()) for p in args.compare]
    if args.minuet:
        roots.append(("minuet", args.minuet.resolve()))
    doc: dict[str, Any] = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "model": str(model), "shape": args.shape,
                           "typing": {"keys": 8, "interval_ms": INTERVAL_MS, "rest_s": REST_S}, "variants": {}}
    with tempfile.TemporaryDirectory(prefix="lc-bench-real-") as tmp:
        work = Path(tmp)
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        variants: list[Variant] = []
        try:
            for i, (label, root) in enumerate(roots):
                vdir = work / f"v{i}"
                vdir.mkdir()
                files = [vdir / m for m in MODULES]
                for f, m in zip(files, MODULES):
                    shutil.copy(stdlib / m, f)
                # the users' recipe, threads included (llama.cpp's own choice, as users get it)
                options = ServerOptions(context_tokens=args.ctx, parallel=args.parallel,
                                        extra_args=[*SERVER_FLAGS, *args.server_arg])
                server = LlamaServer.for_model(model, binary=binary, options=options, log_file=vdir / "server.log")
                server.start(180)
                doc["variants"][label] = {"root": str(root), "server": server.argv[1:], "floor_start": floor_ms(server.url)}
                manifest = register(nvim_bin, root, vdir / "rplugin.vim") if label != "minuet" else vdir / "none.vim"
                env = H.nvim_env(vdir, manifest)
                if label == "minuet":
                    nvim = start_peer(nvim_bin, root, env, server.url)
                else:
                    nvim = start_nvim(nvim_bin, root, manifest, env, {"backends": {"llama.cpp": {"url": server.url}}})
                for f in reversed(files):
                    nvim.command(f"edit {f}")
                v = (PeerVariant if label == "minuet" else Variant)(label, root, server, nvim, files)
                variants.append(v)
            sizes = {i: len(Path(variants[0].files[i]).read_text().splitlines()) for i in range(2)}
            plan = moves(args.bursts + 1, args.seed, sizes)
            for n, (kind, buf, row) in enumerate(plan):
                for v in variants:
                    s = v.burst(kind, buf, row, TEXTS[n % len(TEXTS)])
                    if n == 0:
                        v.samples.clear()  # the first burst starts the host and fills the cache: not measured
                    lat = "none" if s["latency_ms"] is None else f"{s['latency_ms']:.0f} ms"
                    log(f"[{v.label}] {'warm-up' if n == 0 else n}: {kind} ({MODULES[buf]}:{row}) -> {lat}, "
                        f"{s['prompt_tokens']:.0f} prompt / {s['tokens_generated']:.0f} generated tokens, "
                        f"{s['requests']} requests, {s['warmups']} warm-ups, server "
                        f"{s['prompt_tps'] or 0:.0f} / {s['gen_tps'] or 0:.0f} tokens/s")
            for v in variants:
                v.nvim.exec_lua("vim.cmd('stopinsert')")
                entry = doc["variants"][v.label]
                entry["floor_end"] = floor_ms(v.server.url)
                entry["samples"] = v.samples
                entry["summary"] = summary(v.samples)
                entry["summary"]["floor_ms"] = min(entry["floor_start"]["p50_ms"], entry["floor_end"]["p50_ms"])
                try:
                    entry["stats"] = v.counters() if isinstance(v, PeerVariant) else \
                        v.nvim.call("LocalCopilotCall", "status")["stats"]
                except Exception as exc:  # noqa: BLE001
                    entry["stats"] = repr(exc)
        finally:
            for v in variants:
                with contextlib.suppress(Exception):
                    v.nvim.close()
                v.server.stop()
    print(table(doc))
    print()
    for line in verdicts(doc):
        print(line)
    out = args.out or RESULTS / f"real-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, default=str))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
