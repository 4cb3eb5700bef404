"""Repository context, measured on multi-file code nobody here wrote: does what the model is
shown besides the window (the enclosing headers of a cut window, the imported files'
signatures) make a real model write the line that calls another file's code?

    python bench/context_eval.py [--split test|tune] [--tasks 40] [--seed 0] [--json FILE]
    make eval-context EVAL_CONTEXT_ARGS='--tasks 60'

The code: packages of this Python's standard library and Neovim's runtime Lua, copied into a
scratch project (a `.git` marks its root, as a user's repository's does). A task is a line of
a module that calls a name defined in a file the module imports (and not in the module
itself), below its first 20 lines: the cursor sits where the name starts, the line typed up
to there, the rest of the file below, as a user who reached the call would have it. The
answer's first line is scored against the rest of the real line: exact match, and edit
similarity (difflib's ratio).

Each task is asked of the same llama-server (Gemma 3 270M base from PyPI, temperature 0, the
plugin's pipeline in-process as `local-copilot complete` runs it, the window sized to the
server's measured speed after a warm-up, as in the editor) with the context sources on and off:

- window     the text around the cursor alone
- headers    and a cut window's enclosing headers (prompt/scope.py)
- imports    and the imported files' signatures (prompt/imports.py)
- all        both

and the prompt's tokens (the server's count) for each.

Split by package: `tune` (email, json, http, the runtime's vim/treesitter) is what the budgets
and rules may be tuned on; `test` (asyncio, importlib, logging, concurrent, xml, the runtime's
vim/lsp) is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import random
import re
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO))

from bench.public_eval import _Sink, log, start_server  # noqa: E402
from local_copilot.config import load_config  # noqa: E402
from local_copilot.core import Core  # noqa: E402
from local_copilot.devtools.nvim_bin import nvim_binary  # noqa: E402
from local_copilot.devtools.real_models import GEMMA  # noqa: E402
from local_copilot.pipeline.complete import Ask  # noqa: E402
from local_copilot.pipeline.prepare import SOURCES  # noqa: E402
from local_copilot.prompt.imports import import_language, imported_files, signatures  # noqa: E402
from local_copilot.servers.programs import find_llama_server  # noqa: E402
from local_copilot.snapshot import Snapshot  # noqa: E402

RESULTS = REPO / "bench" / "results"
PACKAGES = {  # split -> (source, folder below it)
    "tune": [("stdlib", "email"), ("stdlib", "json"), ("stdlib", "http"), ("nvim", "lua/vim/treesitter")],
    "test": [("stdlib", "asyncio"), ("stdlib", "importlib"), ("stdlib", "logging"), ("stdlib", "concurrent"),
             ("stdlib", "xml"), ("nvim", "lua/vim/lsp")],
}
CONFIGS = {"window": frozenset(), "headers": frozenset({"headers"}), "imports": frozenset({"imports"}),
           "all": frozenset({"headers", "imports"})}
FIRST_ROW = 20
N_PREDICT = 48


class Task:
    def __init__(self, path: Path, lines: list[str], row: int, col: int, name: str) -> None:
        self.path, self.lines, self.row, self.col, self.name = path, lines, row, col, name
        self.want = lines[row][col:]
        self.id = f"{path.name}:{row + 1}:{name}"

    def snapshot(self, buf: int, ft: str) -> Snapshot:
        lines = list(self.lines)
        lines[self.row] = self.lines[self.row][:self.col]  # typed up to the name
        col = len(lines[self.row].encode())
        return Snapshot(buf=buf, tick=1, row=self.row, col=col, first=0, lines=lines, nlines=len(lines),
                        ft=ft, path=str(self.path), et=ft == "python", sw=4 if ft == "python" else 2, ts=8, seq=buf)


def runtime_lua() -> Path:
    found = nvim_binary()
    if found is None:
        raise SystemExit("Neovim not found: run `make venv`")
    nvim = Path(found).resolve()
    for d in (nvim.parent.parent / "share" / "nvim" / "runtime", nvim.parent / "runtime"):
        if (d / "lua" / "vim").is_dir():
            return d
    raise SystemExit(f"no Neovim runtime beside {nvim}")


def make_project(work: Path) -> dict[str, Path]:
    """Scratch projects holding the packages (each with a `.git`, so each is its own root)."""
    roots = {"stdlib": work / "stdlib", "nvim": work / "nvim"}
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for split in PACKAGES.values():
        for source, folder in split:
            src = (stdlib if source == "stdlib" else runtime_lua()) / folder
            dst = roots[source] / folder
            if not dst.exists():
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "test", "tests"))
    for root in roots.values():
        (root / ".git").mkdir(parents=True, exist_ok=True)
    # the packages' own imports of the rest of the standard library resolve there too: copy
    # the top-level modules they name (a user's project holds what it imports)
    for py in stdlib.glob("*.py"):
        if not (roots["stdlib"] / py.name).exists():
            shutil.copy(py, roots["stdlib"] / py.name)
    return roots


def tasks_of(root: Path, folder: str) -> list[Task]:
    out: list[Task] = []
    for path in sorted((root / folder).rglob("*")):
        lang = import_language(str(path))
        if lang not in ("python", "lua") or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        own = {n.split(".")[-1].split(":")[-1] for n, _ in signatures(text, lang)}
        imported: set[str] = set()
        for f in imported_files(str(path), text, lang, root):
            imported |= {n.split(".")[-1].split(":")[-1] for n, _ in signatures(f.read_text(errors="replace"), lang)}
        names = {n for n in imported - own if len(n) > 3}
        if not names:
            continue
        lines = text.split("\n")
        rx = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\s*\(")
        for row in range(FIRST_ROW, len(lines)):
            line = lines[row]
            stripped = line.strip()
            if stripped.startswith(("#", "--", "def ", "local function", "function", ">>>", "...")):
                continue
            m = rx.search(line)
            if m and len(line) < 160:
                out.append(Task(path, lines, row, m.start(1), m.group(1)))
    return out


def similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


async def ask_all(url: str, tasks: list[Task]) -> list[dict[str, Any]]:
    raw = {"backend": "eval", "n_predict": N_PREDICT, "t_max_predict_ms": 60_000,
           "backends": {"eval": {"kind": "llama.cpp", "url": url, "temperature": 0.0, "timeout_ms": 600_000}}}
    cores = {}
    for name, on in CONFIGS.items():
        core = Core(_Sink())
        core.configure(load_config(raw))
        core.prompts.sources_on = on
        cores[name] = core
    rows: list[dict[str, Any]] = []
    buf = 0
    try:
        for i, task in enumerate(tasks):
            ft = import_language(str(task.path))
            row: dict[str, Any] = {"task": task.id, "want": task.want, "language": ft}
            for name, core in cores.items():
                buf += 1
                snap = task.snapshot(buf, ft)
                # the imported signatures are read now (the editor's next key would have them)
                await asyncio.to_thread(core.prompts.imports.now, snap.path, snap.ft, core.prompts.ring.policy)
                if i == 0:  # the editor has measured the server by the time the user calls
                    await core.pipeline.complete(snap, Ask(n_predict=0, cached=False, quiet=True))
                out = await core.pipeline.complete(snap, Ask(cached=False))
                if out.error is not None or out.prepared is None:
                    raise SystemExit(f"{name}: the plugin failed on {task.id}: {out.error}")
                first = out.text.split("\n", 1)[0]
                row[name] = {"text": first, "exact": first.rstrip() == task.want.rstrip(),
                             "similarity": round(similarity(first.rstrip(), task.want.rstrip()), 3),
                             "prompt_tokens": core.prompts.estimator.tokens(
                                 out.prepared.req.prefix + out.prepared.req.middle + out.prepared.req.suffix
                                 + "".join(c.text for c in out.prepared.req.extra)),
                             "sources": [s for s, _ in out.prepared.sources]}
                core.forget(buf)
            rows.append(row)
            if (i + 1) % 10 == 0:
                log(f"{i + 1}/{len(tasks)} tasks")
    finally:
        for core in cores.values():
            await core.close()
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for name in CONFIGS:
        got = [r[name] for r in rows]
        n = len(got) or 1
        out[name] = {"exact": sum(g["exact"] for g in got), "tasks": len(got),
                     "similarity": round(sum(g["similarity"] for g in got) / n, 3),
                     "prompt_tokens": round(sum(g["prompt_tokens"] for g in got) / n)}
    return out


def table(summary: dict[str, Any]) -> str:
    lines = ["| context | exact first line | edit similarity | prompt tokens (mean, estimated) |", "|---|---|---|---|"]
    for name, s in summary.items():
        lines.append(f"| {name} | {s['exact']} / {s['tasks']} | {s['similarity']:.3f} | {s['prompt_tokens']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=("test", "tune"), default="test")
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=RESULTS / "eval-context.json")
    args = ap.parse_args(argv)
    assert set().union(*CONFIGS.values()) <= SOURCES
    binary = find_llama_server()
    if binary is None:
        raise SystemExit("llama-server not found: run `make venv`")
    work = Path(tempfile.mkdtemp(prefix="eval-context-"))
    try:
        roots = make_project(work)
        tasks = [t for source, folder in PACKAGES[args.split] for t in tasks_of(roots[source], folder)]
        log(f"{len(tasks)} candidate tasks in the {args.split} split")
        rnd = random.Random(args.seed)
        tasks = rnd.sample(tasks, min(args.tasks, len(tasks)))
        server, _fim = start_server("gemma", binary, work)
        t0 = time.monotonic()
        try:
            rows = asyncio.run(ask_all(server.url, tasks))
        finally:
            server.stop()
        summary = summarize(rows)
        languages = sorted({r["language"] for r in rows})
        by_language = {lang: summarize([r for r in rows if r["language"] == lang]) for lang in languages}
        doc = {"model": GEMMA.title, "split": args.split, "tasks": len(rows), "seed": args.seed,
               "seconds": round(time.monotonic() - t0), "summary": summary, "by_language": by_language, "rows": rows}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1))
        print(table(summary))
        for lang, part in by_language.items():
            print(f"\n{lang}:\n{table(part)}")
        print(f"({GEMMA.title}, {args.split} split, {len(rows)} tasks, seed {args.seed}; rows in {args.json})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
