"""A suggestion indented otherwise than the buffer, accepted in a real headless Neovim: with Tab
(ghost text), from the completion menu (`setup({ lsp = true })`, vim.lsp.completion), and
printed by `local-copilot complete`. The answers come from real llama-servers whose token-phrase
models (devtools/token_phrase_model.py) write a Python `if` with its body indented by two tabs,
or by eight spaces, at any spot.

What the user sees in the buffer: under `set et sw=4 ts=4` the body at eight spaces (a tab was
one level), under `set noet sw=4 ts=4` at two tabs, whichever the model wrote. Next edits and
instruction edits place whole lines a model wrote: their answers come from loopback FAKES
(tests/fakes) that answer with tabs, as no real next-edit or instruct model runs here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from local_copilot.cli import main as cli
from local_copilot.devtools.token_phrase_model import write_token_phrase_gguf
from local_copilot.servers.llama_cpp import LlamaServer

from ..fakes.fake_chat import FakeChat, chat_sse
from ..fakes.fake_next_edit import FakeNextEditModel
from ..helpers import wait_for
from ..launch import suite_options
from .nvim_session import start_nvim, wait_ghost
from .test_lsp_nvim import accept_first_item
from .test_lsp_nvim import start as start_with_lsp

pytestmark = pytest.mark.integration

# the model's text, spelled in tokens: the body indented by two tabs, or by eight spaces
MODELS = {
    "tabs": ["if", " x:", "\n\t\t", "return", " 1"],
    "spaces": ["if", " x:", "\n        ", "return", " 1"],
}

# the buffer's options, the cursor line (the cursor at its end), and the buffer after the accept
BUFFERS = {
    "expandtab": ("set et sw=4 ts=4", "    ", ["def f(x):", "    if x:", "        return 1"]),
    "noexpandtab": ("set noet sw=4 ts=4", "\t", ["def f(x):", "\tif x:", "\t\treturn 1"]),
}


@pytest.fixture(scope="module")
def servers(llama_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LlamaServer]]:
    with ExitStack() as stack:
        started: dict[str, LlamaServer] = {}
        for name, pieces in MODELS.items():
            d = tmp_path_factory.mktemp(f"indent-{name}")
            model = write_token_phrase_gguf(d / f"{name}.gguf", pieces)
            started[name] = stack.enter_context(
                LlamaServer.for_model(model, binary=llama_bin, log_file=d / "server.log", options=suite_options()))
        yield started


@pytest.fixture()
def sessions() -> Iterator[list[Any]]:
    opened: list[Any] = []
    yield opened
    for nv in opened:
        nv.close()


def shown_at(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], url: str, path: Path, buffer: str,
             sessions: list[Any]) -> Any:
    """A Neovim with the buffer's options and its cursor line, in Insert mode at its end, the
    suggestion asked for and on screen."""
    options, cursor_line, want = BUFFERS[buffer]
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={
        # /infill: the phrase is written after the middle marker whatever the line holds
        "backends": {"llama.cpp": {"url": url, "endpoint": "infill"}}, "debounce_ms": 0, "adaptive_debounce": False,
        "auto_trigger": False, "keymaps": {"trigger": "<C-t>", "accept": "<Tab>", "accept_line": "<C-j>"}})
    sessions.append(nv)
    nv.command(f"edit {path}")
    nv.command(options)
    nv.current.buffer[:] = ["def f(x):", cursor_line]
    nv.command("call cursor(2, 1)")
    nv.input("A<C-t>")
    shown = wait_ghost(nv, lambda t: t.startswith("if x:\n") and t.endswith("return 1"))
    assert shown == "if x:\n" + want[2]  # what is drawn is what Tab inserts
    return nv


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("buffer", list(BUFFERS))
def test_tab_accepts_the_suggestion_indented_the_buffers_way(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], servers: dict[str, LlamaServer],
        sessions: list[Any], tmp_path: Path, buffer: str, model: str) -> None:
    nv = shown_at(nvim_bin, manifest, nvim_env, servers[model].url, tmp_path / "job.py", buffer, sessions)
    nv.input("<Tab>")
    want = BUFFERS[buffer][2]
    wait_for(lambda: nv.current.buffer[:] == want, what="the suggestion accepted", timeout=10)


def test_accept_line_leaves_the_rest_indented_the_buffers_way(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], servers: dict[str, LlamaServer],
        sessions: list[Any], tmp_path: Path) -> None:
    nv = shown_at(nvim_bin, manifest, nvim_env, servers["tabs"].url, tmp_path / "job.py", "expandtab", sessions)
    nv.input("<C-j>")
    assert wait_ghost(nv, lambda t: t == "        return 1")  # the rest, at the new line's start
    nv.input("<Tab>")
    wait_for(lambda: nv.current.buffer[:] == BUFFERS["expandtab"][2], what="the rest accepted", timeout=10)


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("buffer", list(BUFFERS))
def test_the_menu_accepts_the_suggestion_indented_the_buffers_way(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], servers: dict[str, LlamaServer],
        sessions: list[Any], tmp_path: Path, buffer: str, model: str) -> None:
    options, cursor_line, want = BUFFERS[buffer]
    nv = start_with_lsp(nvim_bin, manifest, nvim_env, servers[model].url, tmp_path / "job.py",
                        f"def f(x):\n{cursor_line}\n", auto_trigger=False)
    sessions.append(nv)
    nv.command(options)
    menu = accept_first_item(nv, 2)
    assert menu[0]["abbr"] == "if x:", menu
    wait_for(lambda: nv.current.buffer[:] == want, what="the item inserted", timeout=10)


def test_the_cli_prints_the_suggestion_indented_as_the_file_is(
        tmp_path: Path, servers: dict[str, LlamaServer], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """No editor options here: the file's own indentation (four spaces a level) decides."""
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    config = tmp_path / "config.json"
    config.write_text('{"backends": {"llama.cpp": {"url": "%s", "endpoint": "infill"}}}' % servers["tabs"].url)
    src = tmp_path / "job.py"
    src.write_text("def f(x):\n    y = x\n    \n")
    assert cli.main(["complete", f"{src}:3:5", "--config", str(config)]) == 0
    assert capsys.readouterr().out == "if x:\n        return 1\n"


def test_a_next_edit_from_a_model_indenting_with_tabs_keeps_the_buffers_spaces(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    """The user renames a parameter in a Python buffer ('expandtab'); the next-edit model (a
    loopback FAKE that reads the zeta-2 prompt) renames its use below, writing the region back
    indented with tabs: the edit is the rename alone, and the buffer keeps its spaces."""
    fake = FakeNextEditModel("zeta2")
    fake.tabs = True
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backends": {"llama.cpp": {"url": fake.url}}, "next_edit": {"enabled": True, "debounce_ms": 20}})
    try:
        (tmp_path / "calc.py").write_text("def area(w, h):\n    return w * h\n\nprint(area(2, 3))\n")
        nv.command(f"edit {tmp_path / 'calc.py'}")
        nv.api.win_set_cursor(0, [1, 9])
        nv.input("ciwwidth<Esc>")
        wait_for(lambda: nv.api.get_mode()["mode"] == "n" and nv.current.buffer[0] == "def area(width, h):")
        wait_for(lambda: nv.exec_lua("return require('local_copilot').next_edit_visible()"), what="a next edit")
        # jump to it, then apply it
        assert nv.exec_lua("return require('local_copilot').next_edit_accept()") is True
        assert nv.exec_lua("return require('local_copilot').next_edit_accept()") is True
        assert nv.current.buffer[:] == ["def area(width, h):", "    return width * h", "", "print(area(2, 3))"]
    finally:
        nv.close()
        fake.close()


def test_an_instruction_edit_answered_with_tabs_is_accepted_in_the_buffers_spaces(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    """An instruction edit of a line at column 0 under 'et sw=4 ts=4': the chat model (a
    loopback FAKE that answers as told) writes the body indented with two tabs."""
    fake = FakeChat([chat_sse(["```python\n", "if x:\n", "\t\treturn 1\n", "```"])])
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={"backends": {"llama.cpp": {"url": fake.url}},
                                                        "auto_trigger": False})
    try:
        (tmp_path / "job.py").write_text("x = 1\npass\n")
        nv.command(f"edit {tmp_path / 'job.py'}")
        nv.command("set et sw=4 ts=4")
        edit_id = nv.exec_lua("return require('local_copilot').edit(...)",
                              {"line1": 2, "line2": 2, "instruction": "return 1 when x"})
        wait_for(lambda: nv.exec_lua("local e = require('local_copilot.edit').edits[...]; return e and e.state",
                                     edit_id) == "done", what="the edit's answer")
        assert nv.exec_lua("return require('local_copilot').edit_accept()") is True
        wait_for(lambda: nv.current.buffer[:] == ["x = 1", "if x:", "        return 1"], what="the edit accepted")
    finally:
        nv.close()
        fake.close()
