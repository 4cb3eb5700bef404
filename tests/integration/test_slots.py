"""The request after a superseded one runs in the llama-server slot that holds the buffer's
prompt, on a real llama-server started as users start it by hand (its own defaults: this test
does not use the plugin's launch recipe, whose batch sizes and slots are the plugin's choice)
and with 1, 2 and 4 slots, with and without a unified KV cache.

A key typed while the previous request still streams supersedes it. The server notices the
closed stream only at its next token, so a new request sent at once arrives while the old one
holds its slot: the server gives it another slot by LRU, whose cache holds nothing of this
prompt, and the whole window is evaluated again. The server's log says which slot ran each
task and how many prompt tokens it evaluated; that is what the test reads.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_copilot.backends.slots import Slots
from local_copilot.servers.llama_cpp import LlamaServer, free_port

from ..helpers import wait_for
from .nvim_session import start_nvim

pytestmark = pytest.mark.integration

TEXT = [line for i in range(40) for line in (f"def scale_{i}(value, factor):", f"    return value * {i} + factor")]

# what users run: llama-server's defaults (in this llama.cpp: 4 slots, a unified KV cache)
SERVERS = {
    "defaults": [],
    "np1": ["-np", "1"],
    "np2": ["-np", "2"],
    "np4-unified": ["-np", "4", "--kv-unified"],
    "np4-split": ["-np", "4", "--no-kv-unified", "-c", "16384"],
}

N_PREDICT = 600
FINAL = ("local g = require('local_copilot.ghost').current\n"
         "return g ~= nil and g.final and vim.api.nvim_get_current_line() == '%s'")
STREAMING = ("local g = require('local_copilot.ghost').current\n"
             "return g ~= nil and not g.final and vim.api.nvim_get_current_line() == '%s'")

LAUNCH = re.compile(r"launch_slot_: id +(\d+) \| task (\d+) \|")
# how the server chose the slot of the task launched next: "by id" (the request named it),
# "by LCP similarity", "by LRU"
CHOICE = re.compile(r"selected slot by (\w+)[^\n]*\n[^\n]*launch_slot_: id +\d+ \| task (\d+) \|")
PROMPT = re.compile(r"print_timing: id +\d+ \| task (\d+) \| prompt eval time = +[\d.]+ ms / +(\d+) tokens")
GENERATED = re.compile(r"print_timing: id +\d+ \| task (\d+) \|        eval time = +[\d.]+ ms / +(\d+) tokens")
# the tokens its slot's cache holds when a task ends (a cancelled task prints no timings)
RELEASED = re.compile(r"release: id +\d+ \| task (\d+) \| stop processing: n_tokens = (\d+)")


@pytest.fixture(params=list(SERVERS))
def server(request: pytest.FixtureRequest, models: dict[str, Path], llama_bin: str,
           tmp_path: Path) -> Iterator[tuple[LlamaServer, Path]]:
    log = tmp_path / "server.log"
    port = free_port()
    argv = [llama_bin, "-m", str(models["x"]), "--host", "127.0.0.1", "--port", str(port), "-c", "8192",
            "--cache-reuse", "256", "--metrics", "--no-webui", *SERVERS[request.param]]
    with LlamaServer(argv, port=port, log_file=log) as srv:
        yield srv, log


def tasks(log: Path) -> dict[int, dict[str, Any]]:
    """task id -> the slot that ran it, how it was chosen, prompt tokens evaluated, tokens
    generated, tokens its slot held at its end ("cached")."""
    out: dict[int, dict[str, Any]] = {}
    text = log.read_text(errors="replace")
    for m in CHOICE.finditer(text):
        out.setdefault(int(m.group(2)), {})["chosen"] = m.group(1)
    for rx, key in ((LAUNCH, "slot"), (PROMPT, "prompt"), (GENERATED, "generated"), (RELEASED, "cached")):
        for m in rx.finditer(text):
            if key == "slot":
                out.setdefault(int(m.group(2)), {})["slot"] = int(m.group(1))
            else:
                out.setdefault(int(m.group(1)), {})[key] = int(m.group(2))
    return out


def test_a_superseded_request_leaves_the_buffers_slot_to_the_next(server: tuple[LlamaServer, Path], nvim_bin: str,
                                                                  manifest: Path, nvim_env: dict[str, str],
                                                                  tmp_path: Path) -> None:
    srv, log = server
    # long answers (no short first part) keep a request streaming when the next key comes
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backends": {"llama.cpp": {"url": srv.url}}, "n_predict": N_PREDICT, "n_predict_first": 0, "debounce_ms": 0})
    try:
        path = tmp_path / "scale.py"
        path.write_text("\n".join(TEXT) + "\n")
        nv.command(f"edit {path}")
        nv.command("normal! G")
        # a first suggestion, whole: the server has placed the buffer's prompt in a slot
        nv.input("oa")
        wait_for(lambda: nv.exec_lua(FINAL % "a"), timeout=60, what="the first whole suggestion")
        nv.input("b")  # the next one streams ...
        wait_for(lambda: nv.exec_lua(STREAMING % "ab"), what="the second suggestion streaming")
        before = set(tasks(log))
        nv.input("c")  # ... and is superseded
        wait_for(lambda: nv.exec_lua(FINAL % "abc"), timeout=60, what="the whole suggestion after the third key")
        seen = tasks(log)
        newer = min(k for k in seen if k not in before and "slot" in seen[k])  # the request after "c"
        wait_for(lambda: "prompt" in tasks(log)[newer], what="the server's account of it")
        seen = tasks(log)
        # (a cancelled task's timings are not printed)
        assert seen[max(before)].get("generated", 0) < N_PREDICT, f"nothing was superseded: {seen}"
        # the request after the superseded one ran in its slot and found the window cached: it
        # evaluated the typed character and little else
        assert seen[newer]["slot"] == seen[max(before)]["slot"], seen
        assert seen[newer]["prompt"] <= 8, seen
        # because it named the slot: the server did not choose one for it
        assert seen[newer].get("chosen") == "id", seen
    finally:
        nv.close()


def assert_named_after(seen: dict[int, dict[str, Any]], first: int, most_prompt: int) -> None:
    """Every task after `first` (there is one) ran in its slot, named by the request ("by id"),
    and evaluated at most `most_prompt` prompt tokens."""
    after = [k for k in seen if k > first]
    assert after, seen
    for k in after:
        assert seen[k]["slot"] == seen[first]["slot"], seen
        assert seen[k].get("chosen") == "id", seen
        assert seen[k].get("prompt", 0) <= most_prompt, seen


def test_each_buffers_first_request_names_a_slot_nobody_has_used(models: dict[str, Path], llama_bin: str,
                                                                 nvim_bin: str, manifest: Path,
                                                                 nvim_env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    port = free_port()
    argv = [llama_bin, "-m", str(models["x"]), "--host", "127.0.0.1", "--port", str(port), "-c", "8192",
            "--cache-reuse", "256", "--metrics", "--no-webui"]  # its defaults: 4 slots
    with LlamaServer(argv, port=port, log_file=log) as srv:
        # no speculation: a speculative request of the first buffer, sent once its suggestion
        # is whole, may start after the switch and read as the second buffer's
        nv = start_nvim(nvim_bin, manifest, nvim_env, setup={
            "backends": {"llama.cpp": {"url": srv.url}}, "debounce_ms": 0, "speculative": False})
        try:
            slots_of = []
            for name in ("one.py", "two.py"):
                before = set(tasks(log))
                path = tmp_path / name
                path.write_text("\n".join(TEXT) + "\n")
                nv.input("<Esc>")
                nv.command(f"edit {path}")
                nv.command("normal! G")
                nv.input("oa")  # at once: its first request (a warm-up or this key's) may still run
                wait_for(lambda: nv.exec_lua(FINAL % "a"), timeout=60, what=f"the whole suggestion in {name}")
                wait_for(lambda b=before: all("prompt" in t for k, t in tasks(log).items() if k not in b),
                         what="the server's account of the requests")
                seen = {k: t for k, t in tasks(log).items() if k not in before}
                # every request named its slot, the buffer's first one too: none waited for the
                # server to say where the first one ran, none evaluated the window elsewhere
                assert seen and all(t.get("chosen") == "id" for t in seen.values()), seen
                assert len({t["slot"] for t in seen.values()}) == 1, seen
                slots_of.append(next(iter(seen.values()))["slot"])
            # the second buffer's window did not take the first one's slot
            assert slots_of[0] != slots_of[1], slots_of
        finally:
            nv.close()


# llama-server at its defaults, and with /slots turned off (the server then chooses a
# buffer's first slot itself, and the buffer's next request waits to hear it: placing.py)
@pytest.fixture(params=["defaults", "no-slots-view"])
def slow_server(request: pytest.FixtureRequest, models: dict[str, Path], llama_bin: str,
                tmp_path: Path) -> Iterator[tuple[LlamaServer, Path]]:
    """llama-server at its default slots, made to evaluate a prompt slowly (one token per
    batch, one thread: about a second for the window below), as a real-size model does on a
    CPU, so that the next key comes while the first prompt is being evaluated."""
    log = tmp_path / "server.log"
    port = free_port()
    argv = [llama_bin, "-m", str(models["x"]), "--host", "127.0.0.1", "--port", str(port), "-c", "8192",
            "--cache-reuse", "256", "--metrics", "--no-webui", "-ub", "1", "-t", "1",
            *(["--no-slots"] if request.param == "no-slots-view" else [])]
    with LlamaServer(argv, port=port, log_file=log) as srv:
        yield srv, log


def test_a_buffers_first_request_superseded_during_its_prompt_leaves_its_slot_to_the_next(
        slow_server: tuple[LlamaServer, Path], nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
        tmp_path: Path) -> None:
    srv, log = slow_server
    # no warm-up or speculation: the typed key's request is the buffer's first; a latency
    # target this long sizes the window to the whole context
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backends": {"llama.cpp": {"url": srv.url}}, "debounce_ms": 0, "warm_up": False, "speculative": False,
        "latency_target_ms": 60000, "context": {"lines_before": 2000, "lines_after": 0}})
    try:
        path = tmp_path / "scale.py"
        path.write_text("\n".join(TEXT * 6) + "\n")
        nv.command(f"edit {path}")
        nv.command("normal! G")
        nv.input("oa")
        # (the first fit of the window may be refused as too long and fitted again)
        wait_for(lambda: any("slot" in t for t in tasks(log).values()), what="the first request's launch")
        nv.input("b")  # while the server still evaluates the first prompt
        wait_for(lambda: nv.exec_lua(FINAL % "ab"), timeout=60, what="the whole suggestion after the second key")
        seen = tasks(log)
        # the first request that evaluated the window (a cancelled task prints no timings, but its
        # slot held the window at its end)
        first = min((k for k, t in seen.items() if t.get("cached", 0) > 1000), default=None)
        assert first is not None, f"no request evaluated the whole window: {seen}"
        # nothing else evaluated the window: every later request ran in the first one's slot,
        # named, and evaluated what was typed
        assert_named_after(seen, first, most_prompt=8)
    finally:
        nv.close()


def test_a_key_typed_while_the_buffers_warm_up_runs_waits_for_its_slot(
        slow_server: tuple[LlamaServer, Path], nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
        tmp_path: Path) -> None:
    srv, log = slow_server
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backends": {"llama.cpp": {"url": srv.url}}, "debounce_ms": 0, "speculative": False,
        "latency_target_ms": 60000, "context": {"lines_before": 2000, "lines_after": 0}})
    try:
        nv.command("LocalCopilot stats")  # the host starts, with no request of the buffer
        wait_for(lambda: nv.exec_lua("return require('local_copilot.host').running()"), what="the host")
        nv.command("close")
        path = tmp_path / "scale.py"
        path.write_text("\n".join(TEXT * 6) + "\n")
        nv.command(f"edit {path}")
        nv.input("G")  # the cursor rests: the buffer's first request is a warm-up
        wait_for(lambda: nv.exec_lua("return require('local_copilot.trigger').rest_state().warms") >= 1,
                 what="the warm-up")
        wait_for(lambda: any("slot" in t for t in tasks(log).values()), what="the warm-up's launch")
        nv.input("oa")  # at once, while the server evaluates the warm-up's prompt
        wait_for(lambda: nv.exec_lua(FINAL % "a"), timeout=60, what="the whole suggestion")
        seen = tasks(log)
        warm = min((k for k, t in seen.items() if t.get("cached", 0) > 1000), default=None)
        assert warm is not None, f"no request evaluated the whole window: {seen}"
        # the typed request waited for the warm-up and ran in its slot, the window cached: it
        # evaluated what differs from the warm-up's prompt (the opened line, the typed "a", the
        # lines the window gained), not the window again
        assert_named_after(seen, warm, most_prompt=64)
    finally:
        nv.close()


# what the tests below set: every request is a typed key's, and the window is all of the file
RETURN_SETUP = {"debounce_ms": 0, "speculative": False, "latency_target_ms": 60000}


def suggestion_at_end(nv: Any, log: Path, path: Path, keys: str, line: str) -> dict[int, dict[str, Any]]:
    """`keys` typed at the end of `path` (opened in the window unless it is there), to the
    whole suggestion with `line` as the line typed: the server's tasks for it."""
    before = set(tasks(log))
    nv.input("<Esc>")
    nv.command(f"if expand('%:p') !=# '{path}' | edit {path} | endif")
    nv.command("normal! G")
    nv.input(keys)
    wait_for(lambda: nv.exec_lua(FINAL % line), timeout=60, what=f"the whole suggestion in {path.name}")
    wait_for(lambda: all("prompt" in t for k, t in tasks(log).items() if k not in before),
             what="the server's account of the requests")
    return {k: t for k, t in tasks(log).items() if k not in before}


def assert_window_comes_back(nv: Any, log: Path, path: Path, between: Callable[[], None]) -> None:
    """`oa` typed at the end of `path` (its window evaluated whole), then `between()`, then `Ab`
    at the same place: the server evaluates what changed, not the window again (it finds the
    window in the buffer's slot, or loads it back from its host-memory cache)."""
    path.write_text("\n".join(TEXT) + "\n")
    first = suggestion_at_end(nv, log, path, "oa", "a")
    assert max(t["prompt"] for t in first.values()) > 200, first
    between()
    back = suggestion_at_end(nv, log, path, "Ab", "ab")
    assert back and all(t["prompt"] <= 16 for t in back.values()), back


# at the defaults a request in another slot empties the idle ones (their prompts go to the
# server's host-memory cache); with split caches, or one slot, they keep them
@pytest.mark.parametrize("server", ["defaults", "np4-split", "np1"], indirect=True)
def test_back_in_a_buffer_after_typing_in_another_its_window_is_not_evaluated_again(
        server: tuple[LlamaServer, Path], nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
        tmp_path: Path) -> None:
    srv, log = server
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={"backends": {"llama.cpp": {"url": srv.url}}, **RETURN_SETUP})
    other = tmp_path / "shift.py"
    other.write_text("\n".join(line.replace("scale", "shift") for line in TEXT) + "\n")

    def type_in_another_buffer() -> None:
        seen = suggestion_at_end(nv, log, other, "oa", "a")
        assert max(t["prompt"] for t in seen.values()) > 200, seen  # its own window, whole

    try:
        assert_window_comes_back(nv, log, tmp_path / "scale.py", type_in_another_buffer)
    finally:
        nv.close()


def an_instruction_edit(nv: Any, srv: LlamaServer) -> None:
    """Of the first line: its chat request runs in another slot."""
    nv.input("<Esc>")
    edit_id = nv.exec_lua("return require('local_copilot').edit(...)",
                          {"line1": 1, "line2": 1, "instruction": "rename it"})
    wait_for(lambda: nv.exec_lua("local e = require('local_copilot.edit').edits[...]; return e and e.state",
                                 edit_id) in ("done", "error"), timeout=60, what="the edit's answer")


def another_editors_request(nv: Any, srv: LlamaServer) -> None:
    """The server gives it another slot, and saves and empties this editor's idle one as it
    starts; this editor's next key comes after a pause."""
    done = time.monotonic()
    other = "\n".join(line.replace("scale", "shift") for line in TEXT)
    httpx.post(srv.url + "/completion", json={"prompt": other, "n_predict": 4}, timeout=60).raise_for_status()
    wait_for(lambda: time.monotonic() - done >= Slots.CHECK_AFTER_S + 0.1, what="a pause")


@pytest.mark.parametrize("server", ["defaults"], indirect=True)
@pytest.mark.parametrize("between", [an_instruction_edit, another_editors_request], ids=lambda f: f.__name__)
def test_after_another_request_on_the_same_server_the_window_is_not_evaluated_again(
        server: tuple[LlamaServer, Path], between: Callable[[Any, LlamaServer], None], nvim_bin: str,
        manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    srv, log = server
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backends": {"llama.cpp": {"url": srv.url}}, **RETURN_SETUP, "edit": {"n_predict": 12}})
    try:
        assert_window_comes_back(nv, log, tmp_path / "scale.py", lambda: between(nv, srv))
    finally:
        nv.close()
