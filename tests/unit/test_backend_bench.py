"""`local-copilot bench` pieces that need no server: the chart, the tables, the --backend
parser, the results folder, and the aggregation of samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_copilot.backend_bench.chart import bar_chart
from local_copilot.backend_bench.cli import Progress, chart, parse_target, results_dir
from local_copilot.backend_bench.report import make_report, render_tables
from local_copilot.backend_bench.runner import (
    BackendResult,
    Params,
    Sample,
    make_request,
    summarize_latency,
    summarize_level,
)
from local_copilot.config import load_config
from local_copilot.errors import ConfigError


def read_png(path: Path) -> tuple[int, int, set[tuple[int, int, int]]]:
    """Width, height and the colours of a PNG, read by Pillow (matplotlib's own dependency)."""
    from PIL import Image

    with Image.open(path) as img:
        assert img.format == "PNG"
        rgb = img.convert("RGB")
        return rgb.width, rgb.height, {c for _, c in rgb.getcolors(maxcolors=1 << 20) or []}


# matplotlib's first two colours (its default cycle, C0 and C1): one per backend
C0, C1 = (0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E)


def test_chart_is_a_png_with_bars_in_each_series_colour(tmp_path: Path) -> None:
    path = tmp_path / "c.png"
    bar_chart(path, ["1", "2", "4"], [("llama.cpp", [100.0, 180.0, 210.0]), ("vllm", [90.0, None, 400.0])],
              title="generated tok/s", x_label="concurrent requests", y_label="tokens/s")
    w, h, colours = read_png(path)
    assert (w, h) == (880, 500)
    assert C0 in colours and C1 in colours


def test_results_go_under_the_users_data_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert results_dir() == tmp_path / "data" / "local-copilot" / "bench"


def test_requests_are_unique_per_run_and_sized_by_context_lines() -> None:
    p = Params(n_predict=8, context_lines=12)
    a, b = make_request(0, p, "n1"), make_request(1, p, "n1")
    assert a.prefix != b.prefix and a.prefix.startswith("# bench n1 request 0\n")
    assert a.prefix.count("\n") == 12 + 2 and a.n_predict == 8


def test_aggregation() -> None:
    ok = [Sample(ok=True, ttft_ms=10, total_ms=110, gen_tokens=11, prompt_tokens=100, tokens_from_server=True),
          Sample(ok=True, ttft_ms=20, total_ms=120, gen_tokens=11, prompt_tokens=100, tokens_from_server=True)]
    lat = summarize_latency([*ok, Sample(ok=False, error="boom")])
    assert (lat.requests, lat.ok) == (3, 2) and lat.ttft_ms == {"p50": 15.0, "min": 10.0, "max": 20.0}
    assert lat.decode_tok_s == 100.0 and lat.errors == ["boom"]
    lv = summarize_level(2, [*ok, Sample(ok=False, error="timed out")], wall_s=0.5)
    assert (lv.gen_tok_s, lv.prompt_tok_s, lv.success_rate) == (44.0, 400.0, 0.667)
    assert (lv.ttft_min_ms, lv.ttft_max_ms) == (10.0, 20.0)


def test_tables_and_chart_from_a_report(tmp_path: Path) -> None:
    p = Params(n_predict=16, requests=2, concurrency=[1, 2])
    results = []
    for name, rate in (("llama.cpp", 100.0), ("vllm", 200.0)):
        r = BackendResult(name=name, kind="llama.cpp", url="http://127.0.0.1:1", model="tiny")
        samples = [Sample(ok=True, ttft_ms=5, total_ms=50, gen_tokens=16, prompt_tokens=40)] * 2
        r.latency = summarize_latency(samples)
        r.sweep = [summarize_level(c, samples[:c], wall_s=16 * c / rate) for c in (1, 2)]
        results.append(r)
    text = render_tables(results, p)
    assert "FIM latency: 2 sequential requests of 16 tokens" in text
    lines = text.splitlines()
    header = next(ln for ln in lines if ln.startswith("conc"))
    assert header.split() == ["conc", "backend", "ok", "success", "gen", "tok/s", "prompt", "tok/s", "TTFT", "min",
                              "ms", "TTFT", "max", "ms", "total", "s"]
    assert any(ln.startswith("1     llama.cpp") for ln in lines) and any(ln.startswith("      vllm") for ln in lines)
    chart(make_report(results, p, 0.0), tmp_path / "sweep.png")
    assert read_png(tmp_path / "sweep.png")[:2] == (880, 500)


def test_parse_target() -> None:
    cfg = load_config({"backends": {"lab": {"kind": "openai", "url": "http://127.0.0.1:7000", "model": "m"}}})
    t = parse_target("llama.cpp=http://127.0.0.1:9999", dict(cfg.backends))
    assert (t.name, t.cfg.kind, t.cfg.url) == ("llama.cpp", "llama.cpp", "http://127.0.0.1:9999")
    t = parse_target("vllm=http://127.0.0.1:8001,model=qwen,fim_template=qwen", dict(cfg.backends))
    assert (t.cfg.kind, t.cfg.model, t.cfg.fim_template) == ("openai", "qwen", "qwen")
    assert parse_target("lab", dict(cfg.backends)).cfg.model == "m"
    with pytest.raises(ConfigError, match="kind=, model="):
        parse_target("x=http://127.0.0.1:1,colour=blue", dict(cfg.backends))
    with pytest.raises(ConfigError, match="no such backend"):
        parse_target("nope", dict(cfg.backends))


def test_progress_lines_when_not_a_terminal() -> None:
    import io

    out = io.StringIO()
    p = Progress(4, "auto", out)
    for label in ("a warm-up", "a latency", "a latency", "a c=1"):
        p(label)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[:3] == ["[   1/4] a warm-up", "[   2/4] a latency", "[   4/4] a c=1"]
    assert lines[3].startswith("[   4/4] done in")
