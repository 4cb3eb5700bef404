"""Definitions from the editor's language servers (lua/local_copilot/definitions.lua,
prompt/definitions.py): the issue's two-file project (`geometry.py` defines `scale_points`,
`main.py` imports it), python-lsp-server attached to `main.py` in a real headless Neovim,
`geometry.py` not open. Typing `scale_points(`, what the real llama-server received holds the
definition, its header and short body, under its file's name; a definition in an ignored file
is never sent; a language server that never answers does not delay the ghost text."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ..conftest import PHRASE
from ..fakes.recording_proxy import RecordingProxy
from ..helpers import wait_for
from .nvim_session import REPO, start_nvim, wait_ghost
from .test_context_sources import make_project

pytestmark = pytest.mark.integration

SCALE = ('def scale_points(points, factor, *, origin=(0.0, 0.0)):\n'
         '    """Each point moved away from `origin` by `factor`."""\n'
         '    ox, oy = origin\n'
         '    return [(ox + (x - ox) * factor, oy + (y - oy) * factor) for x, y in points]\n')
GEOMETRY = f'"""Points in the plane."""\n\n\n{SCALE}\n\ndef _unused(x):\n    return x\n'
PYLSP = str(Path(sys.executable).parent / "pylsp")
SILENT = str(REPO / "tests" / "fakes" / "silent_language_server.py")


def _project(tmp_path: Path, ignore: str = "") -> Path:
    return make_project(tmp_path, ignore, geometry=GEOMETRY)  # (geometry.py with scale_points' body)


def _open(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], proxy: RecordingProxy, main: Path,
          cmd: list[str], **options: Any) -> Any:
    """Neovim editing `main` with the language server `cmd` attached to it, the cursor at the
    end of `bigger = scale_points(`."""
    if cmd[0] == PYLSP and not Path(PYLSP).exists():
        pytest.fail("pylsp not found: install the test extra (make venv), which holds python-lsp-server")
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backends": {"llama.cpp": {"url": proxy.url, "endpoint": "infill"}}, "debounce_ms": 0,
        "adaptive_debounce": False, **options})
    nvim.command(f"edit {main}")
    nvim.exec_lua("vim.lsp.start({ name = 'under-test', cmd = ..., root_dir = vim.fs.dirname(vim.api.nvim_buf_get_name(0)) })",
                  cmd)
    wait_for(lambda: nvim.exec_lua(
        "local c = vim.lsp.get_clients({ bufnr = 0 })[1]; return c ~= nil and c.initialized == true"),
        timeout=30, what="the language server attached")
    nvim.command("call cursor(4, 1)")
    return nvim


def _chunks(proxy: RecordingProxy) -> list[list[dict[str, str]]]:
    return [b.get("input_extra", []) for b in proxy.bodies("/infill")]


def test_typing_the_call_sends_the_definition_the_language_server_found(
        proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    nvim = _open(nvim_bin, manifest, nvim_env, proxy, _project(tmp_path), [PYLSP])
    try:
        nvim.input("A")
        wait_ghost(nvim, lambda t: t.startswith(PHRASE.split("\n")[0]))  # the host runs now

        def sent() -> bool:
            nvim.input("p")  # one more key: `scale_points(p`, a request of its own
            return any("ox, oy = origin" in c["text"] for extra in _chunks(proxy) for c in extra)
        wait_for(sent, timeout=60, interval=0.4, what="the definition sent")
        extra = next(e for e in _chunks(proxy) if any("ox, oy = origin" in c["text"] for c in e))
        # the definition's header and short body, under its file's name, in place of the
        # imported file's signatures (imports.py's form ends in "    ...")
        assert extra == [{"filename": "geometry.py", "text": SCALE}]
        assert "_unused" not in json.dumps(proxy.requests)
    finally:
        nvim.close()


def test_where_the_definitions_file_cannot_be_read_the_servers_hover_text_is_sent(
        proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    nvim = _open(nvim_bin, manifest, nvim_env, proxy, _project(tmp_path), [PYLSP])
    try:
        nvim.exec_lua("require('local_copilot.definitions').MAX_BYTES = 16")  # geometry.py is too large to read
        nvim.input("A")
        wait_ghost(nvim, lambda t: t.startswith(PHRASE.split("\n")[0]))

        def sent() -> bool:
            nvim.input("p")
            return any(c["filename"] == "geometry.py" and "Each point moved" in c["text"]
                       for extra in _chunks(proxy) for c in extra)
        wait_for(sent, timeout=60, interval=0.4, what="the hover text sent")
        [chunk] = [c for c in next(e for e in _chunks(proxy) if any("Each point moved" in c["text"] for c in e))
                   if c["filename"] == "geometry.py"]
        # pylsp's hover: the signature and the docstring, its markdown fences left out
        assert "scale_points(points, factor, *, origin=(0.0, 0.0))" in chunk["text"]
        assert "```" not in chunk["text"] and "ox, oy" not in chunk["text"]
    finally:
        nvim.close()


def test_a_definition_far_up_the_same_file_is_sent_and_a_near_one_is_left_to_the_window(
        proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    main = _project(tmp_path)
    filler = "".join(f"step_{i} = {i}\n" for i in range(60))
    main.write_text("def far_helper(a, b):\n    return a * b\n\n\n" + filler + "def near_helper(c):\n    return c\n\n"
                    + "total = far_helper(near_helper(\n")
    nvim = _open(nvim_bin, manifest, nvim_env, proxy, main, [PYLSP], context={"lines_before": 20})
    try:
        nvim.command("call cursor(line('$'), 1)")
        nvim.input("A")
        wait_ghost(nvim, lambda t: t.startswith(PHRASE.split("\n")[0]))

        def sent() -> bool:
            nvim.input("x")
            return any("return a * b" in c["text"] for extra in _chunks(proxy) for c in extra)
        wait_for(sent, timeout=60, interval=0.4, what="the far definition sent")
        extra = next(e for e in _chunks(proxy) if any("return a * b" in c["text"] for c in e))
        assert extra == [{"filename": "main.py", "text": "def far_helper(a, b):\n    return a * b\n"}]
        assert "near_helper" not in json.dumps([c for e in _chunks(proxy) for c in e])
    finally:
        nvim.close()


def test_a_definition_in_an_ignored_file_is_never_sent(
        proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    nvim = _open(nvim_bin, manifest, nvim_env, proxy, _project(tmp_path, ignore="geometry.py\n"), [PYLSP])
    try:
        nvim.input("A")
        wait_ghost(nvim, lambda t: t.startswith(PHRASE.split("\n")[0]))

        def found() -> bool:
            nvim.input("p")
            return bool(nvim.exec_lua("local f = require('local_copilot.definitions')._state(0).found"
                                      " return f ~= nil and f.scale_points ~= nil"))
        wait_for(found, timeout=60, interval=0.4, what="the language server answered")
        # Lua read it (the file is not refused by name); the host refused it by the project's ignore file
        assert nvim.exec_lua("return require('local_copilot.definitions')._state(0).found.scale_points.item.path") \
            == str(tmp_path / "geometry.py")
        sent = len(proxy.bodies("/infill"))
        nvim.input("q")  # a key after the answer reached the host
        wait_for(lambda: len(proxy.bodies("/infill")) > sent, what="a request after the answer")
        for body in proxy.bodies("/infill"):
            assert "ox, oy" not in json.dumps(body)
            assert "scale_points(points" not in json.dumps(body)
    finally:
        nvim.close()


def test_a_language_server_that_never_answers_does_not_delay_the_ghost_text(
        proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "asked.log"
    nvim = _open(nvim_bin, manifest, nvim_env, proxy, _project(tmp_path), [sys.executable, SILENT, str(log)])
    try:
        nvim.exec_lua("require('local_copilot.definitions').TIMEOUT_MS = 600000")  # pending for the whole test
        nvim.input("A")
        wait_ghost(nvim, lambda t: t.startswith(PHRASE.split("\n")[0]))  # the host runs now
        nvim.input("p")  # asks the language server, which never answers
        wait_for(lambda: log.exists() and "textDocument/definition" in log.read_text(), what="the definition asked")
        nvim.input("t")
        # the next keys' ghost text comes while the question is pending
        wait_ghost(nvim, lambda t: t.startswith(PHRASE.split("\n")[0]))
        assert nvim.exec_lua("return require('local_copilot.definitions')._state(0).pending ~= nil")
        assert nvim.current.line == "bigger = scale_points(pt"
    finally:
        nvim.close()


def test_the_names_asked_about_and_the_text_read_of_a_definition(nvim_bin: str, manifest: Path,
                                                                 nvim_env: dict[str, str]) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env)
    try:
        def names(line: str, above: list[str] | None = None) -> list[str]:
            return [n[0] for n in nvim.exec_lua("return require('local_copilot.definitions').names(...)",
                                                line, len(line), above or [])]
        # the call the cursor is in first, then the nearest names before the one being typed
        assert names("bigger = scale_points(") == ["scale_points", "bigger"]
        assert names("x = geo.scale_points(pts, fac") == ["scale_points", "pts", "geo"]
        assert names("f(g(1), h") == ["f", "g"]
        assert names("    return ", ["def area(box):", "    w = width(box)"]) == ["box", "width", "w"]
        assert names("if print(x") == ["print"]  # (keywords and numbers are never asked about)

        def extract(text: str, row: int) -> str:
            return nvim.exec_lua("return require('local_copilot.definitions').extract(...)", text.split("\n"), row)
        py = "@cache\ndef f(a):\n    return a\n\nx = 1\n"
        assert extract(py, 1) == "@cache\ndef f(a):\n    return a"
        lua_src = "local function g(a)\n  return a\nend\nlocal y = 2\n"
        assert extract(lua_src, 0) == "local function g(a)\n  return a\nend"
        long = "int h(void) {\n" + "".join(f"  s{i}();\n" for i in range(30)) + "}\n"
        got = extract(long, 0).split("\n")
        assert got[:2] == ["int h(void) {", "  s0();"] and got[-1] == "    ..." and len(got) == 13

        # the definitions found stay in the order found while the cursor moves on (the prompt's
        # start changes only when one is new); one found again changes in its place
        kept = nvim.exec_lua("""
            local d, s = require('local_copilot.definitions'), { kept = {} }
            d.KEEP = 3
            for _, n in ipairs({ 'a', 'b', 'c', 'b', 'd' }) do d._keep(s, n, { path = n .. '.py', text = n }) end
            d._keep(s, 'c', { path = 'c.py', text = 'c2' })
            d._keep(s, 'b', false)
            return vim.tbl_map(function(k) return k.item.text end, s.kept)""")
        assert kept == ["c2", "d"]
    finally:
        nvim.close()
