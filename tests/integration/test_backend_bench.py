"""`local-copilot bench` as a real process against the real tiny llama-server, and side by
side with a real vLLM (CPU build) on the same tiny model. Small N so it stays quick."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from local_copilot.servers.llama_cpp import LlamaServer

from ..unit.test_backend_bench import read_png
from .nvim_session import REPO

pytestmark = pytest.mark.integration


def bench(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), LOCAL_COPILOT_CONFIG=str(tmp_path / "none.json"))
    (tmp_path / "none.json").write_text("{}")
    return subprocess.run([sys.executable, "-m", "local_copilot.cli", "bench", *args], capture_output=True, text=True,
                          timeout=300, env=env, check=False)


def test_bench_against_llama_server(llama_server: LlamaServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = bench("--backend", f"llama.cpp={llama_server.url}", "-n", "16", "--requests", "3",
                "--concurrency", "1,2,4", "--context-lines", "20", "--out", str(out), tmp_path=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "FIM latency: 3 sequential requests of 16 tokens" in res.stdout
    assert "Concurrency sweep: 16 tokens per request" in res.stdout
    # progress on stderr (lines, since it is not a terminal), ending with the total
    assert "llama.cpp warm-up" in res.stderr and "llama.cpp c=4" in res.stderr
    assert "[  11/11] done in" in res.stderr
    doc = json.loads((tmp_path / "run.json").read_text())
    [b] = doc["backends"]
    assert b["name"] == "llama.cpp" and b["kind"] == "llama.cpp" and b["model"].endswith("tiny-x.gguf")
    lat = b["latency"]
    assert lat["ok"] == 3 and lat["gen_tokens"] == 16.0 and lat["prompt_tokens"] > 100
    assert all(s["tokens_from_server"] for s in lat["samples"])  # llama.cpp timings.predicted_n
    assert lat["server_tok_s"] and lat["decode_tok_s"] > 0 and 0 < lat["ttft_ms"]["p50"] <= lat["total_ms"]["p50"]
    assert [lv["concurrency"] for lv in b["sweep"]] == [1, 2, 4]
    for lv in b["sweep"]:
        assert lv["success_rate"] == 1.0 and lv["gen_tokens"] == 16 * lv["concurrency"]
        assert lv["gen_tok_s"] > 0 and lv["prompt_tok_s"] > 0 and lv["ttft_min_ms"] <= lv["ttft_max_ms"]
    w, h, _ = read_png((tmp_path / "run.png").read_bytes())
    assert (w, h) == (880, 500)


def test_an_unreachable_backend_is_reported_and_exits_1(tmp_path: Path) -> None:
    from local_copilot.servers.ports import free_port

    port = free_port()
    res = bench("--backend", f"llama.cpp=http://127.0.0.1:{port}", "-n", "4", "--requests", "1", "--concurrency", "1",
                "--progress", "none", "--out", str(tmp_path / "down"), tmp_path=tmp_path)
    assert res.returncode == 1
    assert f"llama.cpp (http://127.0.0.1:{port}): not measured: llama.cpp: cannot reach" in res.stdout
    assert res.stderr == ""


@pytest.mark.vllm
def test_bench_llama_cpp_against_vllm(llama_server: LlamaServer, vllm_server: str, tmp_path: Path) -> None:
    res = bench("--backend", f"llama.cpp={llama_server.url}", "--backend", f"vllm={vllm_server}", "-n", "32",
                "--requests", "5", "--concurrency", "1,2,4,8", "--out", str(tmp_path / "both"), tmp_path=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    print(res.stdout)  # the table for the closing note (pytest -s)
    doc = json.loads((tmp_path / "both.json").read_text())
    names = [b["name"] for b in doc["backends"]]
    assert names == ["llama.cpp", "vllm"]
    vllm = doc["backends"][1]
    assert vllm["kind"] == "openai" and vllm["model"] == "tiny-qwen2-fim"
    assert vllm["latency"]["ok"] == 5 and vllm["latency"]["gen_tokens"] == 32.0  # usage.completion_tokens
    assert all(s["tokens_from_server"] for s in vllm["latency"]["samples"])
    for b in doc["backends"]:
        assert [lv["success_rate"] for lv in b["sweep"]] == [1.0, 1.0, 1.0, 1.0]
    read_png((tmp_path / "both.png").read_bytes())
    # both backends side by side in the sweep table, one row each per level
    rows = [ln for ln in res.stdout.splitlines() if ln.startswith(("1 ", "2 ", "4 ", "8 ", "      vllm"))]
    assert len(rows) == 8
