"""`make bench` (bench/run.py) as a real process, tiny settings: every budget (bench/run.py, `budgets()`) gets a
row with a measured value, and the JSON has the numbers. Passing budgets is not asserted here
(this is a smoke test of the harness; the numbers are for bench/results/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .nvim_session import REPO

pytestmark = pytest.mark.integration

ROWS = [
    "last key -> ghost text (p50)", "last key -> ghost text (p90)", "tokens generated / burst",
    "prompt tokens evaluated / burst", "Neovim main thread / key (p50)",
    "Neovim main thread CPU / key (p50)", "Python host CPU / key", "Python host RSS",
    "Neovim main thread CPU added / key",
    "snapshot + prompt, 100k vs 1k lines", "added to nvim --startuptime",
    "next edits: main thread / recorded change (p50)",
    "main loop stall: host start at first Insert", "main loop stall: host start at revival after kill -9",
    "main loop stall: first keys, python without pynvim",
]


def test_bench_measures_every_budget(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    res = subprocess.run([sys.executable, str(REPO / "bench" / "run.py"), "--profiles", "defaults", "--bursts", "2",
                          "--warmup", "0", "--reps", "20", "--startup-runs", "2", "--wakeups", "8", "--floor-bursts", "2",
                          "--host-start-runs", "1",
                          "--out", str(out)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "NOT MEASURED" not in res.stdout, res.stdout
    for row in ROWS:
        line = next((ln for ln in res.stdout.splitlines() if ln.startswith(row)), None)
        assert line and ("PASS" in line or "FAIL" in line), f"{row!r} missing:\n{res.stdout}"
    doc = json.loads(out.read_text())
    p = doc["profiles"]["defaults"]
    assert p["bursts"] == 2 and p["missing_suggestions"] == 0
    assert p["latency_ms"]["p50"] > 0 and p["tokens_predicted_per_burst"] > 0 and p["full_prompt_tokens"] > 0
    assert 0 < p["host_rss_mb"] < 1000 and p["host_cpu_ms_per_key"]["mean"] > 0
    assert p["main_thread_cpu_ms_per_key"]["p50"] >= 0 and p["main_thread_ms_per_key"]["p50"] > 0
    assert p["host_state_after"]["tasks"] == 0
    assert doc["snapshot"]["ratio"] > 0 and doc["startup"]["runs"] == 2
    hs = doc["host_start"]
    assert hs["runs"] == 1 and all(hs[k]["max"] > 0 for k in ("first_insert_ms", "revival_ms", "python_without_pynvim_ms"))
    # the main thread's whole CPU, plugin on vs off (two bursts each at --bursts 2)
    assert len(doc["main_thread"]["on"]) == len(doc["main_thread"]["off"]) == 2, doc["main_thread"]
    assert doc["main_thread"]["on_ms"] > 0 and doc["main_thread"]["off_ms"] > 0
    # and what the plugin adds, split by the variants in between (each measured, two bursts)
    assert set(doc["main_thread"]["split_ms"]) == {"requests and plan messages", "ghost.show", "redraw of the ghost text"}
    assert all(len(v) == 2 for v in doc["main_thread"]["per_key"].values()), doc["main_thread"]
    assert doc["main_thread"]["one_message_us"] > 0 and "what the plugin adds, by variant" in res.stdout
    # the floor under that row: the leanest Neovim side in the plugin's place, which must have
    # drawn suggestions while typed at (a key's answer that comes after the next key is dropped)
    m = doc["main_thread"]
    assert m["floor_keys"] == 3 * 8 and m["floor_drawn"] >= m["floor_keys"] // 2, m
    assert "the leanest Neovim side of a suggestion per key" in res.stdout
    assert {b["budget"] for b in doc["budgets"]} == set(ROWS)
    # the yardstick for the host CPU row: one Python wakeup's CPU on this machine
    assert set(doc["wakeup"]) == {f"{m}_after_{g}ms_us" for m in ("asyncio", "blocking") for g in (1, 90)}
    assert all(v > 0 for v in doc["wakeup"].values()), doc["wakeup"]
    assert "one wakeup of a Python thread" in res.stdout and "asyncio wakeups after 90 ms idle" in res.stdout
    assert set(doc["cold_work"]) == {"window fit", "post-processing"}
    assert all(v > 0 for c in doc["cold_work"].values() for v in c.values()), doc["cold_work"]
    # the floor: a lean loop doing a keystroke's I/O against the same server, its prompt the host's size
    assert doc["floor"]["bursts"] == 2 and doc["floor"]["host_cpu_ms_per_key"] > 0, doc["floor"]
    assert doc["floor"]["prompt_tokens"] > 1000, doc["floor"]
    assert "x the floor" in res.stdout


def test_scripted_session_counts_what_reuse_saves() -> None:
    """bench/session.py (README, "Development"): the same session with and without reuse."""
    res = subprocess.run([sys.executable, str(REPO / "bench" / "session.py")],
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = json.loads((REPO / "bench" / "results" / "session.json").read_text())
    with_reuse, without = (next(r for r in rows if r["reuse"] is flag) for flag in (True, False))
    # typing through the suggestion and retyping after backspaces asks the server less
    assert with_reuse["typed_through"] > 0 and with_reuse["cache_hits"] > 0
    assert with_reuse["requests"] < without["requests"], rows
    assert with_reuse["tokens_generated"] < without["tokens_generated"], rows
    # the accept inserts the rest of the phrase after what was typed
    assert with_reuse["buffer"][2:] == ["\trun(a, b)", "\tok"], rows


def test_the_recorder_row_runs_alone_without_a_server(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    res = subprocess.run([sys.executable, str(REPO / "bench" / "run.py"),
                          "--skip", "bursts,mainthread,snapshot,startup,hoststart,wakeup,floor", "--out", str(out)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "llama-server" not in res.stderr + res.stdout
    [line] = [ln for ln in res.stdout.splitlines() if ln.startswith("next edits: main thread / recorded change")]
    assert "<= 0.05 ms" in line and ("PASS" in line or "FAIL" in line) and "far apart" in line
    doc = json.loads(out.read_text())
    for case in ("typing", "far"):
        r = doc["recorder"][case]
        assert r["changes"] == 20000 and r["with_ms"] > 0 and r["without_ms"] > 0, r
