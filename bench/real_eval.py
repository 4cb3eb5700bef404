"""Quality on real output: real models typed against through the plugin, and minuet beside it.

    python bench/real_eval.py [--minuet DIR | --minuet-from JSON] [--set test] [--files 2] [--positions 6]
                              [--more] [--models gemma,smollm]
    make eval-real EVAL_REAL_ARGS='--minuet ~/.cache/local-copilot/minuet'

36 positions per model by default (2 files per language, 6 positions each). Changes to the
chat style are tuned on `--set tuning` and reported on `--set test`, so that the figure
reported is of positions nobody tuned on.

Each real model that `make venv` installs (python/local_copilot/devtools/real_models.py:
Gemma 3 270M base, no FIM tokens, the `continue` style; SmolLM2 135M Instruct, a chat model,
the `chat` style) runs in a real llama-server (`--no-repack`: repacking these quantizations for
AMX dies with SIGILL on some CPUs). At a few positions of a few files of a set of
bench/eval_files.txt (`test` by default: files no rule was tuned on, though their misses have
been read; `test3` is the set nobody has read), a headless Neovim with
the plugin has the file with a span cut out at the cursor (the rest of a line, a span inside a
line, a line of a block), types the text before the cursor, waits for the ghost text and
accepts it. With --minuet, minuet-ai.nvim does the same in its own Neovim against the same
server, position by position after the plugin, set up as its README advises for such a model:
a base model through `openai_fim_compatible` with the text before the cursor as the prompt
(its llama.cpp recipe, without FIM tokens the model does not have), a chat model through
`openai_compatible` (its hole-filling chat prompt); `context_window = 512`, `max_tokens = 56`,
one completion, as its local llama.cpp example. Without --minuet the run says so and measures
the plugin alone.

What Tab inserted is judged against the text around it:

- rest_of_line   the text after the cursor on its line (3 or more characters) written again
- next_line      a line of the 5 below the cursor written again, at any indentation
- closer         a closing bracket the line already has after the cursor written again
- wrapper        a fence, a think block, a cursor marker (the plugin's or minuet's prompt
                 tags) or a chat turn token, where the file does not have it (Neovim's Lua
                 documents its examples in fences)
- prompt_example the answer of the prompt's own example (the plugin's chat example, minuet's
                 few-shot answer) where the file does not have it
- first-line exact: the first line inserted is the first line of the text that was cut out
- similarity     the first line inserted against the real one (difflib's ratio, 0 where nothing
                 was), and where minuet showed a suggestion: how often the plugin showed one
                 too, and each one's similarity there

The models are small: what they write is often wrong, and first-line exact says how often it
is not; the junk kinds say what the post-processing let through.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pynvim  # noqa: E402

import e2e_eval as E  # noqa: E402
import harness as H  # noqa: E402
from local_copilot.devtools.real_models import GEMMA, NO_REPACK, SMOLLM, RealModel, find  # noqa: E402
from local_copilot.prompt.styles import AFTER_LABEL, BEFORE_LABEL, CHAT_TURN_TOKENS, CURSOR  # noqa: E402
from local_copilot.server_options import ServerOptions  # noqa: E402
from local_copilot.servers.llama_cpp import LlamaServer  # noqa: E402
from local_copilot.servers.programs import find_llama_server  # noqa: E402
from real import PEER_LUA  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
MODELS = {"gemma": GEMMA, "smollm": SMOLLM}
# where the cursor is: the rest of a line missing, a span inside a line, a line of a block
CASE_KINDS = ("line_end", "mid_line", "blank_line")
JUNK = ("rest_of_line", "next_line", "closer", "wrapper", "prompt_example")
WRAPPERS = ("```", "~~~", CURSOR, AFTER_LABEL, BEFORE_LABEL, "<think>", "</think>", "<code>", "</code>", *CHAT_TURN_TOKENS,
            "<cursorPosition>", "<contextBeforeCursor>", "<contextAfterCursor>")
# the answers of the prompts' examples: the plugin's chat example (prompt/styles.py), minuet's
# default few-shot answer (its lua/minuet/config.lua)
EXAMPLE_ANSWERS = ("width * height", "let processed = item", "processed.toUpperCase()")
PATIENCE_S = 120.0  # a real model on a loaded 2-core machine: a cold prompt takes tens of seconds

# minuet's settings for a local llama-server (its README's llama.cpp example: one completion,
# a 512-character context, 56 tokens), per prompt style of the model
MINUET_SETUP = r"""
local url, style = ...
local optional = { max_tokens = 56, top_p = 0.9 }
local providers = {
  continue = { provider = 'openai_fim_compatible', options = {
    api_key = 'TERM', name = 'Llama.cpp', end_point = url .. '/v1/completions', model = 'PLACEHOLDER',
    optional = optional,
    -- the model has no FIM tokens: the text before the cursor is the whole prompt
    template = { prompt = function(before, _, _) return before end, suffix = false },
  } },
  chat = { provider = 'openai_compatible', options = {
    api_key = 'TERM', name = 'Llama.cpp', end_point = url .. '/v1/chat/completions', model = 'PLACEHOLDER',
    optional = optional,
  } },
}
local p = providers[style]
require('minuet').setup({
  provider = p.provider,
  n_completions = 1,
  context_window = 512,
  -- its 3 s default cuts a loaded 2-core machine's answers short (streamed: what came by
  -- then is shown), so the machine's load would decide what it shows; the plugin's editor
  -- waits up to PATIENCE_S too
  request_timeout = 30,
  virtualtext = { auto_trigger_ft = { '*' } },
  provider_options = { [p.provider] = p.options },
})
"""


def pick_cases(which: str, files: int, positions: int, seed: int) -> list[E.Case]:
    """`positions` cases in each of the first `files` files per language of the set."""
    rng = random.Random(seed)
    per_lang: dict[str, int] = defaultdict(int)
    cases: list[E.Case] = []
    for lang, name, path in E.source_files(which):
        if per_lang[lang] >= files:
            continue
        per_lang[lang] += 1
        lines = path.read_text(encoding="utf-8").split("\n")
        got, tries = 0, 0
        while got < positions and tries < 2000:
            tries += 1
            kind = CASE_KINDS[(got + tries) % len(CASE_KINDS)]
            row = rng.randrange(len(lines) // 10, len(lines) - 1)  # past the licence header
            if not E._code_line(lines[row], lang) and kind != "blank_line":
                continue
            spot = E._cases_at(lines, row, kind, lang, rng)
            if spot is None:
                continue
            a, c, b = spot
            if kind == "line_end":
                b = (c[0], len(lines[c[0]]))  # the rest of the line: what a first line is judged on
            case = E.Case(kind, "none", name, lang, lines, a, c, b, burst=True)
            if not case.typed or "\t" in case.typed.lstrip("\n") or not case.middle.strip():
                continue
            cases.append(case)
            got += 1
    return cases


def judge(case: E.Case, after: list[str]) -> dict[str, Any]:
    """What Tab inserted at the case's cursor (the buffer before it: the original file without
    the cut, the text before the cursor typed), and which junk kinds it holds."""
    head, tail = case.text[: case.off(case.c)], case.text[case.off(case.b):]
    before = (head + tail).split("\n")
    t1 = "\n".join(after)
    if not (t1.startswith(head) and t1.endswith(tail)) or len(t1) < len(head) + len(tail):
        return {"inserted": None, "junk": ["other"], "first_line_exact": False}
    ins = t1[len(head): len(t1) - len(tail)]
    row = case.c[0]
    rest = before[row][case.c[1]:]
    junk = []
    if len(rest.strip()) >= 3 and rest.strip() in ins:
        junk.append("rest_of_line")
    below = [ln.strip() for ln in before[row + 1:] if ln.strip()][:5]
    written = [ln.strip() for ln in ins.split("\n")[1:]]
    if ins.startswith("\n") or not before[row][: case.c[1]].strip():
        written.insert(0, ins.split("\n")[0].strip())
    if any(len(w) >= 4 and w in below for w in written):
        junk.append("next_line")
    closer = rest.lstrip()[:1]
    if closer in (")", "]", "}") and ins.count(closer) > ins.count({")": "(", "]": "[", "}": "{"}[closer]):
        junk.append("closer")
    if any(w in ins and w not in case.text for w in WRAPPERS):
        junk.append("wrapper")
    if any(e in ins and e not in case.text for e in EXAMPLE_ANSWERS):
        junk.append("prompt_example")
    first = ins.lstrip("\n").split("\n")[0].strip()
    real = case.middle.lstrip("\n").split("\n")[0].strip()
    return {"inserted": ins, "junk": junk,
            "first_line_exact": bool(ins) and ins.split("\n")[0] == case.middle.split("\n")[0],
            # the first line written against the real one (difflib's ratio, 0 when nothing was)
            "similarity": round(difflib.SequenceMatcher(None, first, real).ratio(), 3) if first else 0.0}


class PluginEditor(E.Editor):
    """The plugin in a headless Neovim (bench/e2e_eval.py's editor), patient with a real model."""

    patience = PATIENCE_S

    def attempt(self, case: E.Case) -> list[str]:
        """The buffer after Tab (untouched when nothing was shown)."""
        return self.run(case).buffer


class MinuetEditor:
    """minuet-ai.nvim in its own headless Neovim, typing as the plugin's editor does."""

    def __init__(self, root: Path, work: Path, url: str, style: str) -> None:
        argv = [H.nvim_binary(), "--clean", "--embed", "--headless", "-n", "--cmd", f"set rtp^={root}",
                "--cmd", "set columns=120 lines=40"]
        env = H.nvim_env(work, work / "none.vim")
        self.nvim: pynvim.Nvim = H.attach_child(argv, env)
        self.root, self.url = work, url
        self.nvim.command("filetype plugin indent off")
        self.nvim.command("set noautoindent nosmartindent nocindent indentexpr= indentkeys= textwidth=0 "
                          "formatoptions= noexpandtab")
        self.nvim.exec_lua(PEER_LUA, "minuet.virtualtext")
        self.nvim.exec_lua(MINUET_SETUP, url, style)

    def close(self) -> None:
        self.nvim.close()

    def attempt(self, case: E.Case) -> list[str]:
        """The buffer after Tab (untouched when nothing was shown)."""
        nv = self.nvim
        E.enter_case(nv, self.root / case.name, case, lambda cond: H.wait_for(cond, timeout=10, what="Insert mode"))
        nv.exec_lua("LCB.draws, LCB.recording = {}, true")
        requests = int(nv.exec_lua("return LCB.requests"))
        for ch in case.typed:
            nv.input({"\n": "<CR>", "<": "<lt>"}.get(ch, ch))
            time.sleep(0.015)
        typed_at = time.monotonic()
        deadline = typed_at + PATIENCE_S
        idle = 0
        while time.monotonic() < deadline and not nv.exec_lua("return LCB.ghost_now()"):
            # its request starts after its debounce; once it ran and the server is idle
            # again with nothing drawn, nothing will be
            asked = int(nv.exec_lua("return LCB.requests")) > requests
            idle = idle + 1 if asked and time.monotonic() - typed_at > 2 and H.server_idle(self.url) else 0
            if idle >= 10:
                break
            time.sleep(0.05)
        if nv.exec_lua("return LCB.ghost_now()"):
            nv.exec_lua("require('minuet.virtualtext').action.accept()")
        after = list(nv.current.buffer[:])
        nv.input("<Esc>")
        H.wait_for(lambda: nv.api.get_mode()["mode"] == "n", timeout=10, what="Normal mode")
        nv.exec_lua("LCB.recording = false")
        return after


def case_label(case: E.Case) -> str:
    return f"{case.kind} {case.name}:{case.c[0] + 1}:{case.c[1]}"


def earlier_minuet(path: Path, title: str, cases: list[E.Case]) -> list[dict[str, Any]]:
    """minuet's results of an earlier run, checked to be at these positions."""
    got = json.loads(path.read_text(encoding="utf-8"))["models"][title]["minuet"]["results"]
    if [r["case"] for r in got] != [case_label(c) for c in cases]:
        raise SystemExit(f"{path}: minuet's positions there are not this run's (--set, --files, --positions, --seed)")
    return list(got)


def wait_idle(url: str, timeout: float = PATIENCE_S) -> None:
    """Until the server has been idle on 3 polls in a row (the plugin's prefetch after an
    accept must not run into the next attempt)."""
    deadline, idle = time.monotonic() + timeout, 0
    while idle < 3 and time.monotonic() < deadline:
        idle = idle + 1 if H.server_idle(url) else 0
        time.sleep(0.1)


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(results)
    shown = [r for r in results if r["inserted"]]
    return {
        "n": n,
        "shown": len(shown),
        "first_line_exact": sum(r["first_line_exact"] for r in results),
        "clean": sum(1 for r in shown if not r["junk"]),
        "similarity": round(sum(r.get("similarity", 0.0) for r in shown) / max(1, len(shown)), 3),
        "junk": {k: sum(k in r["junk"] for r in shown) for k in (*JUNK, "other")},
    }


def against_minuet(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any] | None:
    """Where minuet showed a suggestion: how often the plugin showed one too, and the first
    line's similarity to the real line there, each's."""
    if "minuet" not in results:
        return None
    pairs = [(p, m) for p, m in zip(results["plugin"], results["minuet"], strict=True) if m["inserted"]]
    both = [(p, m) for p, m in pairs if p["inserted"]]
    return {"minuet_shown": len(pairs), "plugin_shown_there": len(both),
            "share": round(len(both) / max(1, len(pairs)), 3),
            "similarity_plugin": round(sum(p.get("similarity", 0.0) for p, _ in pairs) / max(1, len(pairs)), 3),
            "similarity_minuet": round(sum(m.get("similarity", 0.0) for _, m in pairs) / max(1, len(pairs)), 3)}


def table(doc: dict[str, Any]) -> str:
    head = f"{'model':30} {'plugin':8} {'n':>3} {'shown':>7} {'1st line exact':>15} {'clean':>6}  simil.  junk"
    rows = [head]
    for model, by_plugin in doc["models"].items():
        for plugin, entry in by_plugin.items():
            s = entry["summary"]
            n = max(1, s["n"])
            junk = ", ".join(f"{k} {v}" for k, v in s["junk"].items() if v) or "none"
            rows.append(f"{model:30} {plugin:8} {s['n']:>3} {100 * s['shown'] / n:6.0f}% "
                        f"{100 * s['first_line_exact'] / n:14.0f}% {s['clean']:>6}  {s.get('similarity', 0):.2f}  {junk}")
        vs = by_plugin.get("plugin", {}).get("against_minuet")
        if vs:
            rows.append(f"{'':30} where minuet showed one ({vs['minuet_shown']}): the plugin showed one in "
                        f"{vs['plugin_shown_there']} ({100 * vs['share']:.0f}%); first-line similarity there "
                        f"plugin {vs['similarity_plugin']:.2f}, minuet {vs['similarity_minuet']:.2f}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minuet", type=Path, default=None,
                    help="a minuet-ai.nvim checkout, measured in the same run (see README); without it, the plugin alone")
    ap.add_argument("--set", dest="which", choices=E.FILE_SETS, default="test",
                    help="the files of bench/eval_files.txt (default: test, not tuned on but read; test3: held out)")
    ap.add_argument("--files", type=int, default=2, help="files per language (Python, C, Lua)")
    ap.add_argument("--positions", type=int, default=6, help="positions per file")
    ap.add_argument("--more", action="store_true", help="a longer run: 4 files per language, 6 positions each")
    ap.add_argument("--minuet-from", type=Path, default=None,
                    help="minuet's results from an earlier run's JSON at the same positions (same --set, --files, "
                         "--positions, --seed), instead of running it again: they do not depend on the plugin")
    ap.add_argument("--models", default="gemma,smollm", help="which real models, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.more:
        args.files, args.positions = max(args.files, 4), max(args.positions, 6)
    binary = find_llama_server()
    if not binary:
        raise SystemExit("llama-server not found: run `make venv`")
    if args.minuet is None and args.minuet_from is not None:
        H.log(f"minuet: its results of {args.minuet_from}")
    elif args.minuet is None:
        H.log("no --minuet checkout given: measuring the plugin alone (see README: eval-real)")
    elif args.minuet_from is not None:
        raise SystemExit("--minuet and --minuet-from: one or the other")
    elif not (args.minuet / "lua" / "minuet").is_dir():
        raise SystemExit(f"{args.minuet} is not a minuet-ai.nvim checkout (no lua/minuet)")
    cases = pick_cases(args.which, args.files, args.positions, args.seed)
    doc: dict[str, Any] = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "set": args.which,
                           "files": sorted({c.name for c in cases}), "minuet": str(args.minuet or ""), "models": {}}
    t_start = time.monotonic()
    for key in args.models.split(","):
        model: RealModel = MODELS[key]
        path = find(model)
        if path is None:
            raise SystemExit(f"{model.title} not installed: run `make venv`")
        with tempfile.TemporaryDirectory(prefix="lc-eval-real-") as tmp:
            work = Path(tmp)
            options = ServerOptions(parallel=1, context_tokens=4096, extra_args=["--slots", *NO_REPACK])
            server = LlamaServer.for_model(path, binary=binary, options=options, log_file=work / "server.log")
            server.start(180)
            editors: dict[str, Any] = {}
            try:
                (work / "plugin").mkdir()
                ed = PluginEditor(server, work / "plugin")
                editors["plugin"] = ed
                if args.minuet is not None:
                    (work / "minuet").mkdir()
                    editors["minuet"] = MinuetEditor(args.minuet.resolve(), work / "minuet", server.url, model.style)
                results: dict[str, list[dict[str, Any]]] = {k: [] for k in editors}
                if args.minuet_from is not None:
                    results["minuet"] = earlier_minuet(args.minuet_from, model.title, cases)
                for i, case in enumerate(cases):
                    for label, editor in editors.items():
                        wait_idle(server.url)
                        t0 = time.monotonic()
                        r = judge(case, editor.attempt(case))
                        r.update(case=case_label(case), typed=case.typed,
                                 middle=case.middle, seconds=round(time.monotonic() - t0, 1))
                        results[label].append(r)
                        H.log(f"[{model.key} {label}] {i + 1}/{len(cases)} {r['case']}: {r['inserted']!r} "
                              f"(want {case.middle.split(chr(10))[0]!r}) junk {r['junk'] or 'none'}, "
                              f"{r['seconds']} s")
            finally:
                for editor in editors.values():
                    with contextlib.suppress(Exception):  # (a Neovim that died says so above)
                        editor.close()
                server.stop()
            doc["models"][model.title] = {k: {"summary": summarize(v), "results": v} for k, v in results.items()}
            vs = against_minuet(results)
            if vs is not None:
                doc["models"][model.title]["plugin"]["against_minuet"] = vs
    doc["seconds"] = round(time.monotonic() - t_start)
    print(f"set: {args.which} ({', '.join(doc['files'])})")
    if args.minuet is None and args.minuet_from is None:
        print("minuet: not measured (no --minuet checkout given)")
    print(table(doc))
    print(f"{len(cases)} positions per model and plugin in {doc['seconds']} s")
    out = args.json or RESULTS / f"eval-real-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
