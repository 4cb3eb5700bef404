"""Quality on a public benchmark nobody here wrote: HumanEval infilling, scored by its tests.

    python bench/public_eval.py [--models gemma,smollm,tiny] [--sets single,multi,span]
                                [--split test] [--tasks 200] [--seed 0] [--json FILE]
    make eval-public EVAL_PUBLIC_ARGS='--tasks 100'

The data (bench/data/human-eval-infilling/, MIT, from openai/human-eval-infilling) cuts a line
(`single`), a block of lines (`multi`) or a random span (`span`, the light set) out of the
solutions of the 164 HumanEval problems. Each task is a file: the text before the gap, then
(for a line or a block) an empty line where the gap was, the cursor at its start, as a user
who opened a line would have it; for a span the cursor sits where the span was cut out.

Four answers per task, each from the same llama-server with the same model, at temperature 0:

- plugin      the completion pipeline every surface of the editor awaits (pipeline/complete.py,
              in-process as `local-copilot complete` runs it): privacy, window, prompt style,
              post-processing; the text Tab would insert
- naive       the server asked directly: a model with FIM tokens by `/infill` (the text before
              and after the gap), a model without them by `/completion` with the text before
              the gap; stopped at the line end (`single`, `span`) or at a blank line (`multi`)
- no cleanup  the plugin's request, its answer inserted as the server wrote it (only the
              served model's own stop strings cut): what the post-processing adds
- no quiet    the plugin with the quiet gate off: where the rules would show nothing for an
              answer the model wrote, what they kept of it is shown

A completion passes when the task's file with the completion in the gap and the task's
`check()` run without an error: in a subprocess of this Python, in a scratch directory, with no
network (a new network namespace where `unshare -n` works, else sockets refused by the
program's first lines) and a 10 s timeout. pass@1 is the share of tasks passed.

Problems are split by number: HumanEval/N with N % 4 == 0 is the tuning split (misses read,
rules written against them), the rest is the test split (the default; its misses are not read
to write rules). `--tasks` draws that many tasks of each set at random (seeded) from the split.

The generated models (`tiny`: the project's random-weight Qwen2-shaped GGUF with FIM tokens)
write noise: their figure says the whole path runs (requests, post-processing, scoring) and
that the plugin shows no more noise than the server gives, never anything about quality.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import msgspec

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))

from local_copilot.config import load_config  # noqa: E402
from local_copilot.core import Core  # noqa: E402
from local_copilot.devtools.real_models import GEMMA, NO_REPACK, SMOLLM, find  # noqa: E402
from local_copilot.devtools.tiny_model import write_gguf  # noqa: E402
from local_copilot.pipeline.complete import Ask  # noqa: E402
from local_copilot.pipeline.postprocess import PostContext, process  # noqa: E402
from local_copilot.prompt.budget import utf8_len  # noqa: E402
from local_copilot.server_options import ServerOptions  # noqa: E402
from local_copilot.servers.llama_cpp import LlamaServer  # noqa: E402
from local_copilot.servers.programs import find_llama_server  # noqa: E402
from local_copilot.snapshot import Snapshot  # noqa: E402
from local_copilot.updates import Update  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "human-eval-infilling"
RESULTS = Path(__file__).resolve().parent / "results"
SETS = {
    "single": "HumanEval-SingleLineInfilling.jsonl.gz",
    "multi": "HumanEval-MultiLineInfilling.jsonl.gz",
    "span": "HumanEval-RandomSpanInfillingLight.jsonl.gz",
}
ROWS = ("plugin", "naive", "no_cleanup", "no_quiet")
TEST_TIMEOUT_S = 10.0
# server slots, and tasks asked at once: one, as one user's server answers. (Four at once ask
# twice as fast, but each prompt then waits on the others' batches, the plugin measures a
# slower server than a user's and sizes its window smaller: the rows would measure that.)
PARALLEL = 1
# the answer's length, the plugin's (its n_predict option) and the naive request's alike: half
# the plugin's default, room for HumanEval's blocks (a few lines), so that a 2-core machine
# asks a few hundred tasks in minutes; both stop earlier at their own ends
N_PREDICT = 64
# llama-server's cap on generating once a line has ended (the plugin's t_max_predict_ms, 500 ms
# by default): on a loaded machine it cuts answers by time, so the rows would measure the
# machine's load; the eval lets the model end its answer (or n_predict does)
T_MAX_PREDICT_MS = 60_000
# the generated model's figure means nothing about quality: a few tasks show the path runs
TINY_TASKS = 20

# the program's first lines where no network namespace can be made: no socket opens
NO_SOCKETS = (
    "import socket as _s\n"
    "def _refuse(*a, **k):\n"
    "    raise OSError('no network in the eval')\n"
    "_s.socket = _refuse\n_s.create_connection = _refuse\n"
)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_tasks(name: str) -> list[dict[str, Any]]:
    with gzip.open(DATA / SETS[name], "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def split_of(task: dict[str, Any]) -> str:
    number = int(task["task_id"].split("/")[2])
    return "tune" if number % 4 == 0 else "test"


def pick(name: str, split: str, count: int, seed: int) -> list[dict[str, Any]]:
    tasks = [t for t in load_tasks(name) if split_of(t) == split]
    if count and count < len(tasks):
        tasks = random.Random(f"{seed}:{name}").sample(tasks, count)
    return tasks


class Task:
    """One task as a file with a cursor, and the program its tests run."""

    def __init__(self, raw: dict[str, Any], kind: str) -> None:
        self.raw, self.kind = raw, kind
        self.id: str = raw["task_id"]
        prompt, suffix = raw["prompt"], raw["suffix"]
        # a line or a block is cut out whole: the user is on an empty line where it was
        self.gap_line = kind != "span"
        self.before = prompt
        self.after = ("\n" + suffix) if self.gap_line else suffix
        self.text = self.before + self.after
        before_lines = self.before.split("\n")
        self.row = len(before_lines) - 1
        self.col = utf8_len(before_lines[-1])
        self.want: str = raw["canonical_solution"]

    def program(self, completion: str) -> str:
        return self.before + completion + self.after + self.raw["test"] + f"\n\ncheck({self.raw['entry_point']})\n"

    def snapshot(self, buf: int, path: str) -> Snapshot:
        lines = self.text.split("\n")
        if len(lines) > 1 and lines[-1] == "":
            lines.pop()
        # Neovim's python ftplugin: expandtab, shiftwidth 4, tabstop 8
        return Snapshot(buf=buf, tick=1, row=self.row, col=self.col, first=0, lines=lines, nlines=len(lines),
                        ft="python", path=path, et=True, sw=4, ts=8, seq=buf)


class Judge:
    """Runs programs' tests in subprocesses, each once (the same program gets the same verdict)."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.verdicts: dict[str, bool] = {}
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.unshare = self._can_unshare()

    @staticmethod
    def _can_unshare() -> list[str]:
        exe = shutil.which("unshare")
        if exe and subprocess.run([exe, "-n", "true"], capture_output=True).returncode == 0:
            return [exe, "-n"]
        return []

    def _run(self, program: str) -> bool:
        key = hashlib.sha256(program.encode("utf-8", "surrogatepass")).hexdigest()
        if key in self.verdicts:
            return self.verdicts[key]
        d = Path(tempfile.mkdtemp(dir=self.scratch))
        path = d / "task.py"
        path.write_text(("" if self.unshare else NO_SOCKETS) + program, encoding="utf-8", errors="surrogatepass")
        try:
            rc = subprocess.run([*self.unshare, sys.executable, "-I", str(path)], cwd=d, capture_output=True,
                                timeout=TEST_TIMEOUT_S, env={"PATH": os.environ.get("PATH", "")}).returncode
            ok = rc == 0
        except subprocess.TimeoutExpired:
            ok = False
        shutil.rmtree(d, ignore_errors=True)
        self.verdicts[key] = ok
        return ok

    def submit(self, program: str) -> Any:
        return self.pool.submit(self._run, program)


class _Sink:
    """The editor port of the in-process pipeline: nothing is drawn."""

    def update(self, u: Update) -> None:
        pass


async def naive(client: httpx.AsyncClient, url: str, task: Task, fim: bool) -> str:
    stop = ["\n\n"] if task.kind == "multi" else ["\n"]
    body: dict[str, Any] = {"n_predict": N_PREDICT, "temperature": 0.0, "stop": stop, "cache_prompt": True}
    if fim:
        body.update(input_prefix=task.before, input_suffix=task.after)
        path = "/infill"
    else:
        body["prompt"] = task.before
        path = "/completion"
    r = await client.post(url + path, json=body, timeout=600)  # a loaded 2-core machine is slow
    r.raise_for_status()
    text: str = r.json()["content"]
    return text


def _prompt_code() -> str:
    """A digest of the code that builds and sends the plugin's prompt: a cached answer was asked
    with the prompt this code built, so a change there asks every task again (the answer's own
    prompt is not known before it is asked: the window is sized from the server's speed)."""
    digest = hashlib.sha256()
    package = REPO / "python" / "local_copilot"
    for folder in ("prompt", "pipeline", "backends", "transport"):
        for path in sorted((package / folder).rglob("*.py")):
            digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


PROMPT_CODE = _prompt_code()


class Answers:
    """The answers asked so far, one JSON line each, so that a run cut short (a session's end,
    a server that died) goes on where it stopped: keyed by model, task, answer length and the
    prompt-building code (PROMPT_CODE)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[str, dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(ValueError, KeyError):
                    row = json.loads(line)
                    self.rows[row["key"]] = row

    @staticmethod
    def key(model: str, task: Task) -> str:
        return f"{model}:{N_PREDICT}:{T_MAX_PREDICT_MS}:{PARALLEL}:{PROMPT_CODE}:{task.id}"

    def add(self, row: dict[str, Any]) -> None:
        self.rows[row["key"]] = row
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


async def run_model(label: str, url: str, fim: bool, tasks: dict[str, list[Task]], work: Path,
                    streamed: int, answers: Answers) -> dict[str, list[dict[str, Any]]]:
    """Each task's answer to the plugin's request, and the naive request's. The first
    `streamed` tasks of a set are also asked as the editor asks (streamed, the rules cutting
    the stream short): the rows say whether that gave the text the whole answer gives."""
    raw_cfg = {"backend": "eval", "n_predict": N_PREDICT, "t_max_predict_ms": T_MAX_PREDICT_MS,
               "backends": {"eval": {"kind": "llama.cpp", "url": url, "temperature": 0.0, "timeout_ms": 600_000}}}
    core = Core(_Sink())
    core.configure(load_config(raw_cfg))
    pipeline = core.pipeline
    out: dict[str, list[dict[str, Any]]] = {}
    bufs = iter(range(1, 1 << 30))
    gate = asyncio.Semaphore(PARALLEL)

    async def one(client: httpx.AsyncClient, task: Task, stream_too: bool) -> dict[str, Any]:
        key = Answers.key(label, task)
        if key in answers.rows:
            return dict(answers.rows[key])
        async with gate:
            buf = next(bufs)
            snap = task.snapshot(buf, str(work / f"task{buf}.py"))
            # the plugin's request, its whole answer (the rules stop nothing): every row's
            # text is the rules applied to it, as the pipeline applies them
            whole = await pipeline.complete(snap, Ask(cached=False, post="none"))
            if whole.error is not None or whole.prepared is None:
                raise SystemExit(f"{label}: the plugin failed on {task.id}: {whole.error}")
            row: dict[str, Any] = {"task": task.id, "kind": task.kind, "want": task.want, "raw": whole.raw,
                                   "no_cleanup": whole.text,
                                   "pctx": msgspec.to_builtins(msgspec.structs.replace(whole.prepared.pctx, rules="all")),
                                   # the text the prompt held of the task's (the window is sized
                                   # to the server's measured speed), against what the naive one held
                                   "prompt_chars": len(whole.prepared.req.prefix) + len(whole.prepared.req.middle),
                                   "naive_chars": len(task.before)}
            if stream_too:
                streamed = await pipeline.complete(snap, Ask(cached=False))
                row["streamed"], row["streamed_raw"] = streamed.text, streamed.raw
            row["naive"] = await naive(client, url, task, fim)
            core.forget(buf)
        row["key"] = key
        answers.add(row)
        return row

    async with httpx.AsyncClient() as client:
        for kind, items in tasks.items():
            t0 = time.monotonic()
            out[kind] = list(await asyncio.gather(*(one(client, t, i < streamed) for i, t in enumerate(items))))
            log(f"[{label} {kind}] {len(items)} tasks asked in {time.monotonic() - t0:.0f} s")
    await core.close()
    return out


def apply_rules(row: dict[str, Any]) -> None:
    """The plugin's text and the text with the quiet gate off, from the whole answer."""
    pctx = msgspec.convert(row["pctx"], PostContext)
    row["plugin"] = process(row["raw"], pctx, final=True).text
    # a streamed answer stops where the rules are done: it is the whole one's start
    row["whole_raw_prefix"] = "streamed_raw" in row and row["raw"].startswith(row["streamed_raw"])
    row["no_quiet"] = process(row["raw"], msgspec.structs.replace(pctx, rules="no_quiet"), final=True).text


def score(tasks: dict[str, Task], rows: list[dict[str, Any]], judge: Judge) -> None:
    for row in rows:
        apply_rules(row)
    futures = [{r: judge.submit(tasks[row["task"]].program(row[r])) for r in ROWS} for row in rows]
    for row, fs in zip(rows, futures, strict=True):
        row["passed"] = {r: f.result() for r, f in fs.items()}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    out: dict[str, Any] = {row: {"passed": sum(r["passed"][row] for r in rows), "tasks": n,
                                 "nothing": sum(not r[row].strip() for r in rows)} for row in ROWS}
    # the streamed answers the server wrote as it wrote the whole one (four slots batched
    # together do not always write the same at temperature 0): there, the same text shown
    checked = [r for r in rows if "streamed" in r and r["whole_raw_prefix"]]
    out["streamed_same"] = [sum(r["streamed"] == r["plugin"] for r in checked), len(checked),
                            sum("streamed" in r for r in rows)]
    return out


def table(doc: dict[str, Any]) -> str:
    head = ("| model | set | tasks | plugin | naive | no cleanup | no quiet gate | nothing shown (plugin / naive) "
            "| streamed = whole |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for model, sets in doc["models"].items():
        for kind, res in sets.items():
            s = res["summary"]
            n = s["plugin"]["tasks"]

            def cell(row: str, s: dict[str, Any] = s, n: int = n) -> str:
                return f"{s[row]['passed']} ({100 * s[row]['passed'] / max(n, 1):.1f} %)"

            lines.append(f"| {model} | {kind} | {n} | {cell('plugin')} | {cell('naive')} | {cell('no_cleanup')} | "
                         f"{cell('no_quiet')} | {s['plugin']['nothing']} / {s['naive']['nothing']} | "
                         f"{s['streamed_same'][0]} / {s['streamed_same'][1]} (of {s['streamed_same'][2]}) |")
    return "\n".join(lines)


def start_server(key: str, binary: str, work: Path) -> tuple[LlamaServer, bool]:
    """llama-server with the model `key` as its tests run it; whether the model has FIM tokens."""
    if key == "tiny":
        path = write_gguf(work / "tiny-random.gguf", favor=None, seed=1)
        extra: list[str] = []
        fim = True
    else:
        model = {"gemma": GEMMA, "smollm": SMOLLM}[key]
        found = find(model)
        if found is None:
            raise SystemExit(f"{model.title} not installed: run `make venv`")
        path, extra, fim = found, list(NO_REPACK), False
    # a slot per task asked at once, with room for the longest task and its answer
    options = ServerOptions(parallel=PARALLEL, context_tokens=PARALLEL * 2048, extra_args=["--slots", *extra])
    server = LlamaServer.for_model(path, binary=binary, options=options, log_file=work / f"{key}-server.log")
    server.start(180)
    return server, fim


TITLES = {"gemma": GEMMA.title, "smollm": SMOLLM.title, "tiny": "generated tiny Qwen2 (random weights, FIM tokens)"}


def rescore(doc: dict[str, Any], judge: Judge) -> None:
    """The rows of every model and set scored with this checkout's rules (the answers kept)."""
    by_id = {kind: {t["task_id"]: Task(t, kind) for t in load_tasks(kind)} for kind in SETS}
    for sets in doc["models"].values():
        for kind, res in sets.items():
            score(by_id[kind], res["rows"], judge)
            res["summary"] = summarize(res["rows"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gemma,smollm,tiny")
    ap.add_argument("--sets", default="single,multi,span")
    ap.add_argument("--split", choices=("test", "tune"), default="test")
    ap.add_argument("--tasks", type=int, default=100, help="tasks per set drawn from the split (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--streamed", type=int, default=10,
                    help="tasks per set also asked as the editor asks, streamed (checks the rows' texts)")
    ap.add_argument("--rescore", type=Path, default=None,
                    help="a result file of this script: its answers scored with this checkout's rules, no server")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--answers", type=Path, default=RESULTS / "eval-public-answers.jsonl",
                    help="answers asked so far (a run goes on where the last stopped); delete it to ask anew")
    args = ap.parse_args(argv)
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lc-eval-public-") as tmp:
        work = Path(tmp)
        judge = Judge(work)
        log(f"tests run {'in a new network namespace' if judge.unshare else 'with sockets refused'}")
        if args.rescore is not None:
            doc = json.loads(args.rescore.read_text())
            doc["rescored"] = {"from": str(args.rescore), "when": time.strftime("%Y-%m-%dT%H:%M:%S")}
        else:
            binary = find_llama_server()
            if not binary:
                raise SystemExit("llama-server not found: run `make venv`")
            doc = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "split": args.split, "tasks": args.tasks,
                   "seed": args.seed, "models": {}}
            for key in args.models.split(","):
                count = min(args.tasks or TINY_TASKS, TINY_TASKS) if key == "tiny" else args.tasks
                tasks = {kind: [Task(t, kind) for t in pick(kind, args.split, count, args.seed)]
                         for kind in args.sets.split(",")}
                server, fim = start_server(key, binary, work)
                try:
                    rows = asyncio.run(run_model(key, server.url, fim, tasks, work, args.streamed,
                                                 Answers(args.answers)))
                finally:
                    server.stop()
                doc["models"][TITLES[key]] = {kind: {"rows": r} for kind, r in rows.items()}
        rescore(doc, judge)
    doc["seconds"] = round(time.monotonic() - t_start)
    print(f"HumanEval infilling, {doc['split']} split, seed {doc['seed']}, temperature 0"
          + (f" (answers of {doc['when']}, rescored)" if args.rescore else f", {doc['seconds']} s"))
    print(table(doc))
    out = args.json or RESULTS / f"eval-public-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
