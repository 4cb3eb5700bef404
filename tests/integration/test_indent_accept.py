"""A suggestion indented otherwise than the buffer, accepted in a real headless Neovim: with Tab
(ghost text), from the completion menu (`setup({ lsp = true })`, vim.lsp.completion), and
printed by `local-copilot complete`. The answers come from real llama-servers whose token-phrase
models (devtools/token_phrase_model.py) write a Python `if` with its body indented by two tabs,
or by eight spaces, at any spot.

What the user sees in the buffer: under `set et sw=4 ts=4` the body at eight spaces (a tab was
one level), under `set noet sw=4 ts=4` at two tabs, whichever the model wrote.
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


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("buffer", list(BUFFERS))
def test_tab_accepts_the_suggestion_indented_the_buffers_way(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], servers: dict[str, LlamaServer],
        sessions: list[Any], tmp_path: Path, buffer: str, model: str) -> None:
    options, cursor_line, want = BUFFERS[buffer]
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={
        # /infill: the phrase is written after the middle marker whatever the line holds
        "backends": {"llama.cpp": {"url": servers[model].url, "endpoint": "infill"}}, "debounce_ms": 0,
        "adaptive_debounce": False, "auto_trigger": False, "keymaps": {"trigger": "<C-t>", "accept": "<Tab>"}})
    sessions.append(nv)
    nv.command(f"edit {tmp_path / 'job.py'}")
    nv.command(options)
    nv.current.buffer[:] = ["def f(x):", cursor_line]
    nv.command("call cursor(2, 1)")
    nv.input("A<C-t>")
    shown = wait_ghost(nv, lambda t: t.startswith("if x:\n") and t.endswith("return 1"))
    assert shown == "if x:\n" + want[2]  # what is drawn is what Tab inserts
    nv.input("<Tab>")
    wait_for(lambda: nv.current.buffer[:] == want, what="the suggestion accepted", timeout=10)


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
