"""Warm-up: when the cursor rests at a new place in Normal mode, the real llama-server (tiny
model) evaluates that place's prompt and generates nothing, so the first key typed there finds
it cached. Nothing is drawn and the buffer is untouched; warm-ups are counted in the stats."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..helpers import wait_for
from .nvim_session import extmarks, lua, start_nvim, wait_ghost

pytestmark = pytest.mark.integration

LINES = [f"def f{i}(a, b):\n    return a * {i} + b".split("\n") for i in range(40)]
TEXT = [line for pair in LINES for line in pair]


def metric(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5, trust_env=False).text
    found = re.search(rf"^llamacpp:{name}\s+([0-9.eE+-]+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def counters(nv: Any) -> dict[str, int]:
    return nv.call("LocalCopilotCall", "status")["stats"]["counters"]


def start(nvim_bin: str, manifest: Path, env: dict[str, str], url: str, path: Path, **opts: Any) -> Any:
    nv = start_nvim(nvim_bin, manifest, env, setup={"backends": {"llama.cpp": {"url": url}}, "n_predict": 4, **opts})
    nv.command(f"edit {path}")
    nv.current.buffer[:] = TEXT
    # a first suggestion starts the host (a warm-up never does)
    nv.command("normal! G")
    nv.input("o")
    wait_ghost(nv, bool)
    nv.input("<Esc>")
    wait_for(lambda: nv.api.get_mode()["mode"] == "n", what="Normal mode")
    wait_for(lambda: idle(nv), what="nothing in flight")
    return nv


def idle(nv: Any) -> bool:
    state = nv.call("LocalCopilotCall", "debug_state")
    return state["tasks"] == state["speculative"] == state["pauses"] == state["warmups"] == 0


def rest(nv: Any) -> dict[str, Any]:
    """Where the cursor's rests stand in Lua: pending (the rest timer runs), decided, warms (sent)."""
    state: dict[str, Any] = lua(nv, "require('local_copilot.trigger').rest_state()")
    return state


def settled(nv: Any) -> bool:
    """The last rest is decided, the host counted every warm-up Lua sent, and they are done."""
    state = rest(nv)
    return not state["pending"] and counters(nv).get("warmups", 0) == state["warms"] and idle(nv)


def test_resting_at_a_new_place_in_normal_mode_evaluates_its_prompt_and_generates_nothing(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], llama_server: Any, tmp_path: Path) -> None:
    nv = start(nvim_bin, manifest, nvim_env, llama_server.url, tmp_path / "warm.py")
    try:
        before = nv.current.buffer[:]
        wait_for(lambda: settled(nv), what="a warm-up of the place `o` left, if any, done")
        base = counters(nv).get("warmups", 0)
        prompt0, gen0 = metric(llama_server.url, "prompt_tokens_total"), metric(llama_server.url, "tokens_predicted_total")
        nv.input("20G")
        wait_for(lambda: counters(nv).get("warmups", 0) == base + 1, what="a warm-up at line 20")
        wait_for(lambda: idle(nv), what="the warm-up done")
        assert metric(llama_server.url, "prompt_tokens_total") > prompt0  # the new place's prompt was evaluated
        # and nothing generated: with n_predict 0 llama-server samples one token from the logits
        # its prompt evaluation computed anyway, and decodes none (its timings say ~0 ms)
        assert metric(llama_server.url, "tokens_predicted_total") <= gen0 + 1
        # moving along the same line is the same place: no second warm-up
        decided = rest(nv)["decided"]
        nv.input("w")
        nv.input("w")
        wait_for(lambda: rest(nv)["decided"] > decided and settled(nv), what="the rest after `ww` decided")
        assert counters(nv).get("warmups", 0) == base + 1
        assert extmarks(nv) == [] and nv.current.buffer[:] == before
        # the first key there gets its suggestion as usual
        nv.input("A#")
        wait_ghost(nv, bool)
        nv.input("<Esc>")
        # :LocalCopilot stats counts the warm-ups and shows the measured speeds and the context
        nv.command("LocalCopilot stats")
        text = "\n".join(nv.current.buffer[:])
        assert f"warm-ups {base + 1}" in text
        assert re.search(r"server speed +\d+ prompt tokens/s +\d+ generated tokens/s", text), text
        assert re.search(r"context in use +\d+ tokens \(~\d+ characters, \d+ lines above, up to \d+ below\)", text)
    finally:
        nv.close()


def test_warm_up_off(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], llama_server: Any, tmp_path: Path) -> None:
    nv = start(nvim_bin, manifest, nvim_env, llama_server.url, tmp_path / "cold.py", warm_up=False)
    try:
        decided = rest(nv)["decided"]
        nv.input("20G")
        wait_for(lambda: rest(nv)["decided"] > decided, what="the rest at line 20 decided")
        nv.input("5G")
        wait_for(lambda: rest(nv)["decided"] > decided + 1, what="the rest at line 5 decided")
        assert rest(nv)["warms"] == 0
        assert counters(nv).get("warmups", 0) == 0
    finally:
        nv.close()
