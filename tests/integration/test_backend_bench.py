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


def bench(*args: str, tmp_path: Path, pythonpath: tuple[Path, ...] = (), cwd: Path | None = None,
          **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, [*pythonpath, REPO / "python"])),
               LOCAL_COPILOT_CONFIG=str(tmp_path / "none.json"), **env_extra)
    (tmp_path / "none.json").write_text("{}")
    return subprocess.run([sys.executable, "-m", "local_copilot.cli", "bench", *args], capture_output=True, text=True,
                          timeout=300, env=env, check=False, cwd=cwd)


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
    w, h, _ = read_png(tmp_path / "run.png")
    assert (w, h) == (880, 500)
    assert (tmp_path / "run.txt").read_text() in res.stdout  # the table, as printed
    assert res.stdout.rstrip().endswith(f"wrote {out}.json, {out}.txt, {out}.png")


def test_without_matplotlib_and_out_the_json_and_table_go_to_the_data_directory(llama_server: LlamaServer,
                                                                                tmp_path: Path) -> None:
    # matplotlib absent, as after a plain install without the `bench` extra
    absent = tmp_path / "absent"
    (absent / "matplotlib").mkdir(parents=True)
    (absent / "matplotlib" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'matplotlib'\")\n")
    cwd = tmp_path / "project"
    cwd.mkdir()
    res = bench("--backend", f"llama.cpp={llama_server.url}", "-n", "4", "--requests", "1", "--concurrency", "1",
                "--progress", "none", tmp_path=tmp_path, pythonpath=(absent,), cwd=cwd,
                XDG_DATA_HOME=str(tmp_path / "data"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert ("no chart: matplotlib is not installed; the table and the JSON hold every number. For the chart:"
            " in the plugin's folder, .venv/bin/python -m pip install '.[bench]'") in res.stdout
    [json_file] = (tmp_path / "data" / "local-copilot" / "bench").glob("bench-*.json")
    text_file = json_file.with_suffix(".txt")
    assert res.stdout.rstrip().endswith(f"wrote {json_file}, {text_file}")
    assert "Concurrency sweep: 4 tokens per request" in text_file.read_text()
    assert json.loads(json_file.read_text())["backends"][0]["sweep"][0]["ok"] == 1
    assert list(cwd.iterdir()) == []  # nothing in the folder the user stands in


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
    read_png(tmp_path / "both.png")
    # both backends side by side in the sweep table, one row each per level
    rows = [ln for ln in res.stdout.splitlines() if ln.startswith(("1 ", "2 ", "4 ", "8 ", "      vllm"))]
    assert len(rows) == 8
