"""The realistic profile: what a user feels on a real-size model, not the plugin's own overhead.

    python bench/real.py [--launch defaults,np1] [--rest 0,0.6] [--minuet DIR] [--bursts 10]
                         [--compare /path/to/other/checkout] [--shape qwen2.5-coder-1.5b]
                         [--model gemma|smollm]
    make bench-real BENCH_REAL_ARGS='--minuet ~/.cache/local-copilot/minuet'

A server runs a random-weight model with Qwen2.5-Coder-0.5B's exact compute shape
(python/local_copilot/devtools/real_shape_model.py; generated once, cached), where the
server's prompt evaluation is the cost, started as `--launch` says (bench/servers.py: llama-server
at its own defaults as users start it by hand, with -np 1, with the plugin's recipe; vLLM with
prefix caching on and off). The plugin types in a real headless Neovim, in two standard-library
modules, bursts of 8 keys at 90 ms/key at positions that move as a user's do: the next line, a
few lines down, another function, back to an earlier place, another buffer, and back where
the user was in the other buffer (at llama-server's defaults the server empties an idle slot
when another starts: the return finds its prompt only if the plugin lets the server place it;
its rows are also reported apart). Before each burst the cursor rests at the new place in
Normal mode for each `--rest` (0: the user types at once; 0.6 s: time a warm-up may use), then
`o` opens a line and 7 characters follow.

`--model gemma|smollm` serves one of the two real models from PyPI instead (Gemma 3 270M base,
SmolLM2-135M-Instruct; devtools/real_models.py) on llama-server: their lines end, so the first
whole line and the whole suggestion are what a user waits for there; minuet asks them as its
README's local examples do (the text before the cursor for the base model, chat for the other).

Per burst: last key -> first ghost text for that text, the characters it shows, last key -> the
first whole line on screen (the suggestion reaches past the cursor's line, or nothing more is
coming), last key -> the whole suggestion (the plugin's final draw; minuet draws only whole
answers), all timed in Neovim (bench/instrument.lua); the server's prompt tokens evaluated and
tokens generated (its /metrics), the plugin's requests, the server's measured speeds.

Clients, each with its own Neovim: this checkout; --compare checkouts (e.g. `git archive main |
tar -x -C DIR`), interleaved burst by burst so all see the same machine load; with --minuet DIR
(a minuet-ai.nvim snapshot, e.g. from the `fetch` tool), minuet at its README's settings for a
local llama-server ("minuet") and tuned for speed, debounce and throttle 0 ("minuet tuned").
On llama-server every client has its own server; on vLLM (minutes to start, gigabytes each) the
clients share one, one after the other, its prefix cache emptied between them.

Two floors per server: "cached 6-token request" (the same short request again, answered whole
from the cache) and "first token, prompt cached" (the window with one more character, streamed
to its first token: the least a suggestion can wait after a key, measured as the plugin waits).
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

import pynvim  # noqa: E402

import harness as H  # noqa: E402
import servers as S  # noqa: E402
from local_copilot.devtools.real_models import GEMMA, SMOLLM, ensure  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
INTERVAL_MS = 90
# 7 characters after `o`: code-like, never the model's text
TEXTS = ["x = 1; ", "total =", "if a >", "return ", "for i i", "name = ", "count +", "print(s",
         "data = ", "yield i", "args = ", "result ", "key = k", "self.na", "raise V", "path = "]
MODULES = ("argparse.py", "textwrap.py")


log, pct = H.log, H.pct

# the move back to the line last typed at in the other buffer
RETURN = "back in the other buffer"


def moves(n: int, seed: int, sizes: dict[int, int]) -> list[tuple[str, int, int]]:
    """(kind, buffer index, row) for `n` bursts: rows in lines of the files as they are (rows
    shift as typed lines are added; the runner adds them)."""
    rng = random.Random(seed)
    kinds = ["next line", "a few lines down", "another function", "back to an earlier place", "another buffer",
             RETURN]
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
        elif kind == "another buffer" or kind == RETURN:
            buf = 1 - buf
            there = [r for b, r in history if b == buf]
            row = there[-1] if kind == RETURN and there else rng.randint(sizes[buf] // 5, sizes[buf] * 4 // 5)
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
    # this checkout's host runs in g:local_copilot_python; an older one (--compare) in python3's host
    argv = [nvim_bin, "--clean", "--embed", "--headless", "-n", "--cmd", f"set rtp^={root}",
            "--cmd", f"let g:local_copilot_python = '{sys.executable}'",
            "--cmd", f"let g:python3_host_prog = '{sys.executable}'", "--cmd", "set columns=120 lines=40"]
    nvim = H.attach_child(argv, env)
    nvim.command(f"let g:loaded_remote_plugins = '{manifest}'")
    nvim.command(f"source {manifest}")
    nvim.command("set autoindent expandtab shiftwidth=4")
    nvim.exec_lua("require('local_copilot').setup(...)", setup)
    nvim.exec_lua(H.INSTRUMENT.read_text())
    return nvim


class Variant:
    """One client (this checkout, another, minuet) at one rest, its Neovim, against `server`."""

    def __init__(self, label: str, rest: float, server: S.BenchServer, nvim: pynvim.Nvim,
                 files: list[Path]) -> None:
        self.label, self.rest, self.server, self.nvim, self.files = label, rest, server, nvim, files
        self.samples: list[dict[str, Any]] = []
        self.added = [0, 0]  # lines typed into each buffer so far (rows below shift down)
        self.placed: dict[int, list[int]] = {0: [], 1: []}  # where lines were opened, per buffer
        self._c0: dict[str, int] = {}

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
        """The suggestion on screen is final (its rest is fetched once typing pauses), then the server idle."""
        H.wait_for(lambda: self.nvim.exec_lua(
            "local g = require('local_copilot.ghost')\n"
            "return g.current == nil or g.current.final == true"), timeout=timeout, what="a final suggestion")
        self.server.settle(timeout)

    def row_now(self, buf: int, row: int) -> int:
        """A row of the original file, in the buffer as it is now (lines typed above push it down)."""
        return row + sum(1 for r in self.placed[buf] if r < row)

    def burst(self, kind: str, buf: int, row: int, text: str) -> dict[str, Any]:
        """One burst alone: move, rest, type, wait for the suggestion; the server's counters around it."""
        m0 = self.server.counters()
        self.move(buf, row)
        if self.rest:
            time.sleep(self.rest)  # the user's pause at the new place (what a warm-up may use)
        self.type(text)
        sample = self.collect(kind, buf, row, text)
        d = self.server.counters().minus(m0)
        sample.update({"prompt_tokens": d.prompt_tokens, "tokens_generated": d.generated,
                       "prompt_s": d.prompt_s, "gen_s": d.gen_s,
                       "prompt_tps": d.prompt_tokens / d.prompt_s if d.prompt_s > 0 else None,
                       "gen_tps": d.generated / d.gen_s if d.gen_s > 0 else None})
        return sample

    # A burst in three steps, so that several editors can take each step together (bench/team.py).

    def move(self, buf: int, row: int) -> None:
        """Normal mode, then to `row` of the original file in buffer `buf`, typed as a user moves."""
        nvim = self.nvim
        nvim.input("<Esc>")
        H.wait_for(lambda: nvim.api.get_mode()["mode"] == "n", timeout=10, what="Normal mode")
        self._c0 = self.counters()  # from before the move: a warm-up while the cursor rests is part of the burst
        nvim.command(f"buffer {self.files[buf]}")
        target = self.row_now(buf, row)
        nvim.input(f"{target}G")  # CursorMoved runs as it does for a user
        H.wait_for(lambda: nvim.current.window.cursor[0] == target, timeout=10, what="the cursor moved")

    def type(self, text: str) -> None:
        """`o` and `text`, one key every INTERVAL_MS, from a timer inside Neovim."""
        self.nvim.exec_lua("LCB.burst(...)", ["o", *text], INTERVAL_MS)

    def collect(self, kind: str, buf: int, row: int, text: str) -> dict[str, Any]:
        """After typing: the suggestion for the last key, then everything idle; the sample."""
        nvim = self.nvim
        H.wait_for(lambda: nvim.exec_lua("return LCB.done"), timeout=20, what="the burst typed")
        got = True
        try:
            H.wait_for(self.ghost_now, timeout=60, what="a suggestion after the burst")
        except AssertionError:
            got = False
        self.settle()
        c1 = self.counters()
        res = nvim.exec_lua("return LCB.result()")
        nvim.exec_lua("LCB.stop()")
        self.placed[buf].append(row)
        last = res["keys"][-1]
        draws = [d for d in res["draws"] if d["tick"] == res["tick"] and d["t"] >= last] if got else []
        whole = [d for d in draws if d.get("whole_line")]
        # the plugin's draw of a plan it marks final; each of minuet's draws is a whole answer
        final = [d for d in draws if d.get("final", True) is True]
        sample = {
            "move": kind, "buffer": buf, "row": row, "text": text,
            "latency_ms": (draws[0]["t"] - last) / 1e6 if draws else None,
            "chars_first": draws[0].get("chars") if draws else None,
            "whole_line_ms": (whole[0]["t"] - last) / 1e6 if whole else None,
            "whole_ms": (final[0]["t"] - last) / 1e6 if final else None,
            "requests": c1.get("requests", 0) - self._c0.get("requests", 0),
            "warmups": c1.get("warmups", 0) - self._c0.get("warmups", 0),
            "errors": c1.get("errors", 0) - self._c0.get("errors", 0),
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
api.nvim_buf_set_extmark = function(buf, id, line, col, opts)
  local r = set_extmark(buf, id, line, col, opts)
  if id == ns and B.recording then
    -- what the user sees: the characters of the virtual text and lines; minuet draws a
    -- completion once its request has ended (or its timeout fired), so every draw is whole
    local chars = 0
    for _, chunk in ipairs(opts and opts.virt_text or {}) do chars = chars + vim.fn.strchars(chunk[1]) end
    for _, l in ipairs(opts and opts.virt_lines or {}) do
      chars = chars + 1
      for _, chunk in ipairs(l) do chars = chars + vim.fn.strchars(chunk[1]) end
    end
    B.draws[#B.draws + 1] = { t = hr(), tick = api.nvim_buf_get_changedtick(buf == 0 and api.nvim_get_current_buf() or buf),
      chars = chars, whole_line = true }
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
# advises to start with; max_tokens 56; one completion); everything else its defaults, or, tuned
# for speed, debounce and throttle 0 (its config.lua: "use 0 to disable")
MINUET_SETUP = r"""
local url, model, tuned, style = ...
local optional = { max_tokens = 56, top_p = 0.9 }
local prompts = {
  -- Qwen's FIM tokens (the shape model has them)
  fim = function(before, after, _)
    return '<|fim_prefix|>' .. before .. '<|fim_suffix|>' .. after .. '<|fim_middle|>'
  end,
  -- a base model without FIM tokens: the text before the cursor is the whole prompt
  continue = function(before, _, _) return before end,
}
local provider, options
if style == 'chat' then
  provider, options = 'openai_compatible', {
    api_key = 'TERM', name = 'Llama.cpp', end_point = url .. '/v1/chat/completions', model = model,
    optional = optional }
else
  provider, options = 'openai_fim_compatible', {
    api_key = 'TERM', name = 'Llama.cpp', end_point = url .. '/v1/completions', model = model,
    optional = optional, template = { prompt = prompts[style], suffix = false } }
end
require('minuet').setup({
  provider = provider,
  n_completions = 1,
  context_window = 512,
  throttle = tuned and 0 or nil,
  debounce = tuned and 0 or nil,
  virtualtext = { auto_trigger_ft = { '*' } },
  provider_options = { [provider] = options },
})
"""


def start_peer(nvim_bin: str, root: Path, env: dict[str, str], server: S.BenchServer, tuned: bool,
               style: str = "fim") -> pynvim.Nvim:
    argv = [nvim_bin, "--clean", "--embed", "--headless", "-n", "--cmd", f"set rtp^={root}",
            "--cmd", "set columns=120 lines=40"]
    nvim = H.attach_child(argv, env)
    nvim.command("set autoindent expandtab shiftwidth=4")
    nvim.exec_lua(PEER_LUA, "minuet.virtualtext")
    model = S.SERVED_NAME if server.kind == "vllm" else "PLACEHOLDER"
    nvim.exec_lua(MINUET_SETUP, server.url, model, tuned, style)
    return nvim


class PeerVariant(Variant):
    """A peer plugin (minuet) in its own Neovim."""

    def counters(self) -> dict[str, int]:
        return {"requests": int(self.nvim.exec_lua("return LCB.requests"))}

    def ghost_now(self) -> bool:
        return bool(self.nvim.exec_lua("return LCB.ghost_now()"))

    def settle(self, timeout: float = 90.0) -> None:
        self.server.settle(timeout)


def summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    lat = [s["latency_ms"] for s in samples if s["latency_ms"] is not None]
    back = [s for s in samples if s["move"] == RETURN]
    whole = [s["whole_line_ms"] for s in samples if s.get("whole_line_ms") is not None]
    done = [s["whole_ms"] for s in samples if s.get("whole_ms") is not None]
    med = lambda key: statistics.median([s[key] for s in samples if s.get(key) is not None] or [float("nan")])  # noqa: E731

    def rate(tokens: str, seconds: str) -> float:
        spent = sum(s.get(seconds) or 0 for s in samples)
        return sum(s[tokens] for s in samples) / spent if spent > 0 else float("nan")

    return {
        "bursts": len(samples), "missing": sum(1 for s in samples if s["latency_ms"] is None),
        "p50_ms": pct(lat, 50), "p90_ms": pct(lat, 90),
        "chars_first_p50": med("chars_first"), "whole_line_p50_ms": pct(whole, 50),
        "whole_p50_ms": pct(done, 50),
        "prompt_tokens_per_burst": statistics.fmean(s["prompt_tokens"] for s in samples),
        # the moves of the plan before the returns came in: read against tables made without them
        "p50_without_returns_ms": pct([s["latency_ms"] for s in samples
                                       if s["latency_ms"] is not None and s["move"] != RETURN], 50),
        "returns": len(back),
        "return_p50_ms": pct([s["latency_ms"] for s in back if s["latency_ms"] is not None], 50),
        "return_prompt_tokens": statistics.fmean(s["prompt_tokens"] for s in back) if back else float("nan"),
        "tokens_generated_per_burst": statistics.fmean(s["tokens_generated"] for s in samples),
        "requests_per_burst": statistics.fmean(s["requests"] for s in samples),
        "warmups_per_burst": statistics.fmean(s["warmups"] for s in samples),
        # over the whole run: vLLM records a request's times when it ends, seen a step later
        "prompt_tps": rate("prompt_tokens", "prompt_s"), "gen_tps": rate("tokens_generated", "gen_s"),
    }


ROWS = [
    ("last key -> first ghost text p50", lambda v: f"{v['p50_ms']:.0f} ms"),
    ("p90", lambda v: f"{v['p90_ms']:.0f} ms"),
    ("p50 without the returns to the other buffer", lambda v: f"{v.get('p50_without_returns_ms', float('nan')):.0f} ms"),
    ("characters shown at the first ghost text (p50)", lambda v: f"{v['chars_first_p50']:.0f}"),
    ("last key -> first whole line p50", lambda v: f"{v['whole_line_p50_ms']:.0f} ms"),
    ("last key -> whole suggestion p50", lambda v: f"{v.get('whole_p50_ms', float('nan')):.0f} ms"),
    ("prompt tokens evaluated / burst", lambda v: f"{v['prompt_tokens_per_burst']:.0f}"),
    ("back in the other buffer: first ghost text p50", lambda v: f"{v.get('return_p50_ms', float('nan')):.0f} ms"),
    ("back in the other buffer: prompt tokens / burst",
     lambda v: f"{v.get('return_prompt_tokens', float('nan')):.0f} ({v.get('returns', 0)} bursts)"),
    ("tokens generated / burst", lambda v: f"{v['tokens_generated_per_burst']:.0f}"),
    ("requests / burst", lambda v: f"{v['requests_per_burst']:.1f}"),
    ("warm-ups / burst", lambda v: f"{v['warmups_per_burst']:.1f}"),
    ("bursts without a suggestion", lambda v: f"{v['missing']} of {v['bursts']}"),
    ("server prompt tokens/s", lambda v: f"{v['prompt_tps']:.0f}"),
    ("server generated tokens/s", lambda v: f"{v['gen_tps']:.0f}"),
]


def table(doc: dict[str, Any], launch: str) -> str:
    """One launch's table: a column per client and rest."""
    entries = {k: v for k, v in doc["variants"].items() if v["launch"] == launch}
    floors = doc["servers"][launch]["floors"]
    head = ["", *(f"{v['client']}, rest {v['rest']:g} s" for v in entries.values())]
    body = [[name, *(fmt(v["summary"]) for v in entries.values())] for name, fmt in ROWS]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    server = doc["servers"][launch]
    return "\n".join([
        f"### {launch}: {server['kind']} {' '.join(server['argv'])}",
        f"model: {doc.get('model', doc.get('shape'))}",
        f"slots: {server.get('slots') or '-'}; floors on this server: cached 6-token request "
        f"{floors['cached_6_ms']:.0f} ms, first token with the prompt cached {floors['first_token_ms']:.0f} ms",
        "", line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, body)])


def verdicts(doc: dict[str, Any]) -> list[str]:
    """The issue's targets, per launch and rest, for this checkout against minuet at its defaults."""
    out = []
    by: dict[tuple[str, float], dict[str, Any]] = {}
    for v in doc["variants"].values():
        by.setdefault((v["launch"], v["rest"]), {})[v["client"]] = v["summary"]
    for (launch, rest), clients in by.items():
        s = clients.get("this")
        if s is None:
            continue
        rows = [("p50 <= 600 ms", f"{s['p50_ms']:.0f} ms", s["p50_ms"] <= 600),
                ("p90 <= 1.5 s", f"{s['p90_ms']:.0f} ms", s["p90_ms"] <= 1500)]
        m = clients.get("minuet")
        if m:
            rows += [("p50 <= minuet's p50 / 5", f"{s['p50_ms']:.0f} vs {m['p50_ms']:.0f} ms",
                      s["p50_ms"] * 5 <= m["p50_ms"]),
                     ("p90 <= minuet's p50 / 2.5", f"{s['p90_ms']:.0f} vs {m['p50_ms']:.0f} ms",
                      s["p90_ms"] * 2.5 <= m["p50_ms"])]
        out += [f"{'PASS' if ok else 'FAIL'}  {launch}, rest {rest:g} s: {what}: {value}" for what, value, ok in rows]
    one = {rest: c["this"]["p50_ms"] for (launch, rest), c in by.items() if launch == "np1" and "this" in c}
    for (launch, rest), c in by.items():
        if launch == "defaults" and "this" in c and rest in one:
            p = c["this"]["p50_ms"]
            out.append(f"{'PASS' if p <= 1.25 * one[rest] else 'FAIL'}  defaults within 25 % of -np 1, rest {rest:g} s: "
                       f"{p:.0f} vs {one[rest]:.0f} ms")
    return out


def run_bursts(variants: list[Variant], plan: list[tuple[str, int, int]]) -> None:
    """Every variant types every burst of `plan`, interleaved burst by burst; the first burst
    starts the host and fills the cache and is not measured."""
    for n, (kind, buf, row) in enumerate(plan):
        for v in variants:
            s = v.burst(kind, buf, row, TEXTS[n % len(TEXTS)])
            if n == 0:
                v.samples.clear()
            lat = "none" if s["latency_ms"] is None else f"{s['latency_ms']:.0f} ms"
            log(f"[{v.server.launch} {v.label} rest {v.rest:g}] {'warm-up' if n == 0 else n}: {kind} "
                f"({MODULES[buf]}:{row}) -> {lat}, {s['chars_first'] or 0} chars, {s['prompt_tokens']:.0f} prompt / "
                f"{s['tokens_generated']:.0f} generated tokens, {s['requests']} requests, {s['warmups']} warm-ups, "
                f"server {s['prompt_tps'] or 0:.0f} / {s['gen_tps'] or 0:.0f} tokens/s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bursts", type=int, default=10, help="measured bursts per variant")
    ap.add_argument("--launch", default="defaults,np1",
                    help=f"comma-separated servers, each a table: {', '.join(S.LAUNCHES)} (see bench/servers.py)")
    ap.add_argument("--rest", default="0,0.6", help="comma-separated rests before typing, in seconds")
    ap.add_argument("--plugin-root", type=Path, default=H.REPO, help="the checkout measured (default: this one)")
    ap.add_argument("--compare", type=Path, action="append", default=[],
                    help="another checkout measured in the same run, burst by burst (e.g. the 'before')")
    ap.add_argument("--minuet", type=Path, default=None,
                    help="a minuet-ai.nvim checkout, measured in the same run at its README's settings for a local"
                         " llama-server and tuned for speed")
    ap.add_argument("--shape", default="qwen2.5-coder-0.5b")
    ap.add_argument("--model", choices=("gemma", "smollm"), default=None,
                    help="serve a real model from PyPI instead of the random-weight shape (llama-server only)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=8192, help="the server's -c / --max-model-len")
    ap.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                    help="one more server argument, repeated for each (e.g. --server-arg=-ngl --server-arg=99)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    launches = [x for x in args.launch.split(",") if x]
    rests = [float(x) for x in args.rest.split(",") if x]
    if bad := [x for x in launches if x not in S.LAUNCHES]:
        raise SystemExit(f"unknown --launch {bad}: one of {', '.join(S.LAUNCHES)}")
    nvim_bin = H.nvim_binary()
    real = {"gemma": GEMMA, "smollm": SMOLLM}[args.model] if args.model else None
    model_file = ensure(real) if real else None
    style = real.style if real else "fim"
    clients: list[tuple[str, Path]] = [("this" if args.plugin_root == H.REPO else str(args.plugin_root),
                                        args.plugin_root.resolve())]
    clients += [(str(p), p.resolve()) for p in args.compare]
    if args.minuet:
        if not (args.minuet / "lua" / "minuet").is_dir():
            raise SystemExit(f"--minuet {args.minuet}: not a minuet-ai.nvim checkout (no lua/minuet)")
        clients += [("minuet", args.minuet.resolve()), ("minuet tuned", args.minuet.resolve())]
    else:
        log("no --minuet checkout given: measuring the plugin alone (a snapshot of minuet-ai.nvim, e.g. from the"
            " `fetch` tool, goes in --minuet DIR)")
    doc: dict[str, Any] = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "shape": args.shape,
                           "model": real.title if real else f"random weights, {args.shape}'s shape",
                           "typing": {"keys": 8, "interval_ms": INTERVAL_MS, "rests_s": rests},
                           "servers": {}, "variants": {}}
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    floor_text = (stdlib / "textwrap.py").read_text()
    with tempfile.TemporaryDirectory(prefix="lc-bench-real-") as tmp:
        work = Path(tmp)
        manifests: dict[Path, Path] = {}
        sizes = {i: len((stdlib / m).read_text().splitlines()) for i, m in enumerate(MODULES)}
        plan = moves(args.bursts + 1, args.seed, sizes)
        n = 0

        def variant(label: str, root: Path, rest: float, server: S.BenchServer) -> Variant:
            nonlocal n
            n += 1
            vdir = work / f"v{n}"
            vdir.mkdir()
            files = [vdir / m for m in MODULES]
            for f, m in zip(files, MODULES):
                shutil.copy(stdlib / m, f)
            peer = label.startswith("minuet")
            if not peer and root not in manifests:
                manifests[root] = register(nvim_bin, root, work / f"rplugin-{len(manifests)}.vim")
            env = H.nvim_env(vdir, manifests.get(root, vdir / "none.vim"))
            if peer:
                nvim = start_peer(nvim_bin, root, env, server, tuned=label.endswith("tuned"), style=style)
            else:
                nvim = start_nvim(nvim_bin, root, manifests[root], env, server.backend())
            for f in reversed(files):
                nvim.command(f"edit {f}")
            return (PeerVariant if peer else Variant)(label, rest, server, nvim, files)

        def record(v: Variant) -> None:
            with contextlib.suppress(Exception):
                v.nvim.exec_lua("vim.cmd('stopinsert')")
            stats: Any = None
            try:
                stats = v.counters() if isinstance(v, PeerVariant) else v.nvim.call("LocalCopilotCall", "status")["stats"]
            except Exception as exc:  # noqa: BLE001
                stats = repr(exc)
            doc["variants"][f"{v.server.launch}: {v.label}, rest {v.rest:g} s"] = {
                "launch": v.server.launch, "client": v.label, "rest": v.rest, "samples": v.samples,
                "summary": summary(v.samples), "stats": stats}

        def describe(server: S.BenchServer) -> None:
            doc["servers"][server.launch] = {"kind": server.kind, "argv": server.argv, "slots": S.slots_of(server),
                                             "floors": server.floors(floor_text)}

        for launch in launches:
            if launch.startswith("vllm"):
                # one server for the clients, one after the other, its prefix cache emptied between
                server = S.start(launch, workdir=work, ctx=args.ctx, shape=args.shape, extra=args.server_arg,
                                 model=model_file)
                try:
                    describe(server)
                    for label, root in clients:
                        for rest in rests:
                            server.reset_cache()
                            v = variant(label, root, rest, server)
                            try:
                                run_bursts([v], plan)
                                record(v)
                            finally:
                                with contextlib.suppress(Exception):
                                    v.nvim.close()
                finally:
                    server.stop()
                continue
            variants: list[Variant] = []
            try:
                for label, root in clients:
                    for rest in rests:
                        server = S.start(launch, workdir=work, ctx=args.ctx, shape=args.shape,
                                         extra=args.server_arg, model=model_file)
                        if launch not in doc["servers"]:
                            describe(server)
                        variants.append(variant(label, root, rest, server))
                run_bursts(variants, plan)
                for v in variants:
                    record(v)
            finally:
                for v in variants:
                    with contextlib.suppress(Exception):
                        v.nvim.close()
                    v.server.stop()
    for launch in launches:
        print(table(doc, launch))
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
