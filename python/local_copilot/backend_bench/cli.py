"""`local-copilot bench`: arguments, progress bar, and the outputs (the table, printed and
written as text; the JSON; the PNG chart when matplotlib is installed). Files go under the
user's data directory (platformdirs) unless --out names a path.

    local-copilot bench --backend llama.cpp=http://127.0.0.1:8012 --backend vllm=http://127.0.0.1:8000 \\
        -n 64 --requests 5 --concurrency 1,2,4,8,16 --out ~/bench/run1

A backend is NAME=URL, optionally followed by ,kind=openai ,model=M ,fim_template=qwen
,api_key_env=VAR ,ca_file=PEM ,tls_verify=false; a bare NAME takes its entry from the
configuration. The kind of a name that is not built in is asked from the server
(backends/detect.py: what only SGLang or LM Studio answers, else what llama-server or Ollama
answers, else OpenAI-compatible).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import msgspec
import platformdirs

from ..backend_config import BackendConfig
from ..backends.detect import guess_sync
from ..config import builtin_backends
from ..errors import ConfigError
from ..transport.access import ca_file_problem, sync_client
from .chart import CHART_EXTRA_HINT, bar_chart, chart_missing
from .report import BenchReport, make_report, render_tables
from .runner import BackendResult, Params, Target, bench_backend, planned_requests

__all__ = ["add_arguments", "run", "parse_target", "Progress", "chart", "results_dir"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", "-b", action="append", metavar="NAME[=URL[,key=value...]]", default=[],
                   help="a backend to measure (repeat for a side-by-side run); default: the configured one")
    p.add_argument("--config", metavar="FILE", help="JSON or TOML file with the setup() options")
    p.add_argument("-n", "--n-predict", type=int, default=64, help="tokens per request (default 64)")
    p.add_argument("--requests", type=int, default=5, help="sequential requests of the latency test (default 5)")
    p.add_argument("--concurrency", default="1,2,4,8,16", help="levels of the sweep, comma-separated (default 1,2,4,8,16)")
    p.add_argument("--rounds", type=int, default=1, help="requests per client at each level (default 1)")
    p.add_argument("--context-lines", type=int, default=30, help="lines above the cursor in each prompt (default 30)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured requests first (default 1)")
    p.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false",
                   help="let the model stop early (default: exactly -n tokens)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one request may take (default 120)")
    p.add_argument("--out", metavar="PATH",
                   help=f"write PATH.json, PATH.txt and PATH.png (default {results_dir()}/bench-DATE)")
    p.add_argument("--no-png", dest="png", action="store_false", help="skip the chart")
    p.add_argument("--progress", choices=["auto", "bar", "lines", "none"], default="auto",
                   help="progress on stderr: a bar on a terminal, lines otherwise (default auto)")


# ------------------------------------------------------------------------------------ targets


TARGET_FIELDS = ("kind", "model", "fim_template", "api_key_env", "ca_file", "tls_verify")


def _detect_kind(url: str, cfg: BackendConfig) -> str:
    with sync_client(cfg, timeout=2.0) as client:
        return guess_sync(client, url)


def parse_target(spec: str, configured: dict[str, BackendConfig]) -> Target:
    """NAME, or NAME=URL[,key=value...]."""
    name, sep, rest = spec.partition("=")
    name = name.strip()
    if not name:
        raise ConfigError(f"--backend {spec!r}: expected NAME=URL")
    if not sep:
        if name not in configured:
            raise ConfigError(f"--backend {name}: no such backend in the configuration; give NAME=URL")
        return Target(name, configured[name])
    url, *pairs = rest.split(",")
    fields: dict[str, Any] = {}
    if name in configured:
        fields.update(msgspec.structs.asdict(configured[name]))
    elif name in builtin_backends():
        fields.update(builtin_backends()[name])
    fields["url"] = url.strip()
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or key.strip() not in TARGET_FIELDS:
            raise ConfigError(f"--backend {spec!r}: {pair!r} is not one of {', '.join(f + '=' for f in TARGET_FIELDS)}")
        fields[key.strip()] = value.strip()
    try:
        cfg = msgspec.convert(fields, BackendConfig, strict=False)  # (tls_verify=false: a string)
        if "kind" not in fields:
            cfg = msgspec.structs.replace(cfg, kind=_detect_kind(fields["url"], cfg))
    except msgspec.ValidationError as exc:
        raise ConfigError(f"--backend {spec!r}: {exc}") from None
    problem = ca_file_problem(cfg.ca_file) if cfg.ca_file else None
    if problem:
        raise ConfigError(f"--backend {spec!r}: ca_file {cfg.ca_file!r} {problem}")
    return Target(name, cfg)


# ------------------------------------------------------------------------------------ progress


class Progress:
    """A bar redrawn in place on a terminal; one line per phase otherwise (logs stay short)."""

    def __init__(self, total: int, mode: str = "auto", stream: TextIO | None = None) -> None:
        self.total, self.done = max(total, 1), 0
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if self.stream.isatty() else "lines"
        self.mode = mode
        self.label = ""
        self.t0 = time.monotonic()

    def __call__(self, label: str) -> None:
        self.done += 1
        if self.mode == "bar":
            width = 30
            filled = int(width * self.done / self.total)
            pct = 100 * self.done / self.total
            self.stream.write(f"\r\x1b[K[{'#' * filled}{'.' * (width - filled)}] {pct:3.0f}% "
                              f"{self.done}/{self.total} {label}  {time.monotonic() - self.t0:.0f}s")
            self.stream.flush()
        elif self.mode == "lines" and label != self.label:
            self.stream.write(f"[{self.done:>4}/{self.total}] {label}\n")
            self.stream.flush()
        self.label = label

    def close(self) -> None:
        if self.mode == "bar":
            self.stream.write("\r\x1b[K")
        elif self.mode == "lines":
            self.stream.write(f"[{self.done:>4}/{self.total}] done in {time.monotonic() - self.t0:.1f}s\n")
        self.stream.flush()


# ------------------------------------------------------------------------------------ outputs


def chart(report: BenchReport, path: Path) -> None:
    """The concurrency sweep's chart, as a PNG at `path` (needs matplotlib)."""
    levels = sorted({lv.concurrency for r in report.backends for lv in r.sweep})
    series = []
    for r in report.backends:
        by_c = {lv.concurrency: lv.gen_tok_s for lv in r.sweep}
        series.append((r.name, [by_c.get(c) for c in levels]))
    bar_chart(path, [str(c) for c in levels], series, x_label="concurrent requests", y_label="generated tokens/s",
              title=f"generated tok/s ({report.params.n_predict} tokens per request)")


def results_dir() -> Path:
    """Where results go when --out says nothing: the user's data directory, not the folder
    the command runs in."""
    return Path(platformdirs.user_data_dir("local-copilot")) / "bench"


def _out_prefix(arg: str | None, started: float) -> Path:
    if arg:
        return Path(arg).expanduser()
    return results_dir() / time.strftime("bench-%Y%m%d-%H%M%S", time.localtime(started))


def run(args: argparse.Namespace, raw: dict[str, Any]) -> int:
    """`local-copilot bench` with `raw`, the options of the file `--config` names (cli/main.py
    reads it, as for every command)."""
    from ..health.report import load_options

    cfg, _, error = load_options(raw)
    if cfg is None:
        raise ConfigError(error or "no configuration")
    specs = args.backend or [cfg.backend]
    targets = [parse_target(s, dict(cfg.backends)) for s in specs]
    try:
        levels = [int(x) for x in str(args.concurrency).split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--concurrency {args.concurrency!r}: expected numbers like 1,2,4,8") from None
    if any(c < 1 for c in levels) or args.n_predict < 1 or args.requests < 0 or args.rounds < 1:
        raise ConfigError("--concurrency levels, -n and --rounds must be positive")
    params = Params(n_predict=args.n_predict, requests=args.requests, concurrency=levels, rounds=args.rounds,
                    context_lines=max(1, args.context_lines), warmup=max(0, args.warmup),
                    ignore_eos=args.ignore_eos, timeout_s=args.timeout)
    started = time.time()
    progress = Progress(planned_requests(params) * len(targets), args.progress)

    async def measure() -> list[BackendResult]:
        return [await bench_backend(t, params, progress=progress) for t in targets]

    try:
        results = asyncio.run(measure())
    finally:
        progress.close()
    report = make_report(results, params, started)
    tables = render_tables(results, params)
    sys.stdout.write(tables)
    prefix = _out_prefix(args.out, started)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    json_path = prefix.with_name(prefix.name + ".json")
    json_path.write_bytes(msgspec.json.format(msgspec.json.encode(report), indent=2))
    text_path = prefix.with_name(prefix.name + ".txt")
    text_path.write_text(tables)
    written = [str(json_path), str(text_path)]
    if args.png and any(r.sweep for r in results):
        missing = chart_missing()
        if missing:
            sys.stdout.write(f"\nno chart: {missing}; the table and the JSON hold every number."
                             f" For the chart: {CHART_EXTRA_HINT}\n")
        else:
            png_path = prefix.with_name(prefix.name + ".png")
            chart(report, png_path)
            written.append(str(png_path))
    sys.stdout.write("\nwrote " + ", ".join(written) + "\n")
    return 1 if any(r.error for r in results) else 0
