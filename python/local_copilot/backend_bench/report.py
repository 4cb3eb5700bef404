"""The bench results as terminal tables and as one JSON document."""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Sequence

import msgspec

from .runner import BackendResult, Params

__all__ = ["BenchReport", "make_report", "latency_table", "sweep_table", "render_tables"]


class BenchReport(msgspec.Struct, kw_only=True):
    version: int = 1
    started_at: str
    duration_s: float
    machine: dict[str, str | int]
    params: Params
    backends: list[BackendResult]


def make_report(results: list[BackendResult], params: Params, started: float) -> BenchReport:
    return BenchReport(
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        duration_s=round(time.time() - started, 2),
        machine={"cpus": os.cpu_count() or 0, "platform": platform.platform(), "python": sys.version.split()[0]},
        params=params, backends=results)


def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> list[str]:
    """Columns padded to their widest cell; the first `left` columns align left."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) if i < left else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def latency_table(results: Sequence[BackendResult], params: Params) -> list[str]:
    measured = [r for r in results if r.latency is not None]
    if not measured:
        return []
    rows: list[list[str]] = []

    def row(label: str, values: list[str]) -> None:
        rows.append([label, *values])

    lat = [r.latency for r in measured]
    row("model", [r.model.rsplit("/", 1)[-1] or "?" for r in measured])  # a .gguf path: its file name
    row("requests ok", [f"{x.ok}/{x.requests}" for x in lat if x])
    row("time to first token p50 (ms)", [_fmt(x.ttft_ms["p50"]) for x in lat if x])
    row("time to first token min..max (ms)", [f"{_fmt(x.ttft_ms['min'])}..{_fmt(x.ttft_ms['max'])}" for x in lat if x])
    row(f"end-to-end for {params.n_predict} tokens p50 (ms)", [_fmt(x.total_ms["p50"]) for x in lat if x])
    row("generated tokens per request", [_fmt(x.gen_tokens) for x in lat if x])
    row("prompt tokens per request", [_fmt(x.prompt_tokens, 0) for x in lat if x])
    row("decode tok/s p50", [_fmt(x.decode_tok_s) for x in lat if x])
    row("end-to-end tok/s p50", [_fmt(x.e2e_tok_s) for x in lat if x])
    row("server-reported tok/s p50", [_fmt(x.server_tok_s) for x in lat if x])
    title = f"FIM latency: {params.requests} sequential requests of {params.n_predict} tokens"
    return [title, *_table(["", *[r.name for r in measured]], rows)]


def sweep_table(results: Sequence[BackendResult], params: Params) -> list[str]:
    levels = sorted({lv.concurrency for r in results for lv in r.sweep})
    if not levels:
        return []
    rows: list[list[str]] = []
    for c in levels:
        first = True
        for r in results:
            lv = next((x for x in r.sweep if x.concurrency == c), None)
            if lv is None:
                continue
            rows.append([str(c) if first else "", r.name, f"{lv.ok}/{lv.requests}", f"{lv.success_rate * 100:.0f}%",
                         _fmt(lv.gen_tok_s), _fmt(lv.prompt_tok_s), _fmt(lv.ttft_min_ms), _fmt(lv.ttft_max_ms),
                         _fmt(lv.total_s, 2)])
            first = False
    header = ["conc", "backend", "ok", "success", "gen tok/s", "prompt tok/s", "TTFT min ms", "TTFT max ms", "total s"]
    rounds = f"{params.rounds} request{'s' if params.rounds > 1 else ''} per client"
    title = f"Concurrency sweep: {params.n_predict} tokens per request, {rounds}"
    return [title, *_table(header, rows, left=2)]


def render_tables(results: Sequence[BackendResult], params: Params) -> str:
    out: list[str] = []
    for r in results:
        if r.error:
            out.append(f"{r.name} ({r.url}): not measured: {r.error}")
    for block in (latency_table(results, params), sweep_table(results, params)):
        if block:
            if out:
                out.append("")
            out.extend(block)
    errors = [(r.name, e) for r in results for e in (r.latency.errors if r.latency else [])]
    errors += [(r.name, e) for r in results for lv in r.sweep for e in lv.errors]
    if errors:
        out.append("")
        out.append("errors:")
        for name, e in dict.fromkeys(errors):
            out.append(f"  {name}: {e}")
    return "\n".join(out) + "\n"
