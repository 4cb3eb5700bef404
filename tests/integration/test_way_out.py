"""Messages that say what to do, read off the screen of a real headless Neovim as a user reads
them: a misspelt option or keymap names the one meant, a choice out of its values lists them,
the first "cannot reach" says how to start the server, and a server's own error text is shown
as its words, not as the JSON it came in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from local_copilot.servers.ports import free_port

from ..fakes.fake_server import FakeServer, llama_props, sse
from ..helpers import wait_for
from .nvim_session import attach_ui, lua, start_nvim
from .test_messages import drawn

pytestmark = pytest.mark.integration

# wide enough for each whole message (a narrower command line shows its start, the log all)
COLUMNS = 220


def shown(nvim: Any, start: str = "local-copilot:") -> str:
    return wait_for(lambda: next((ln for ln in drawn(nvim) if ln.startswith(start)), None), what=f"a line {start!r}")


def typing(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path, setup: dict[str, Any]) -> Any:
    """A Neovim with `setup`'s options, a UI of COLUMNS, typing in Insert mode (the host starts
    and judges the options)."""
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup=setup, columns=COLUMNS)
    attach_ui(nvim, COLUMNS, 24)
    nvim.command("set noshowmode")  # '-- INSERT --' would be drawn over a message
    nvim.command(f"edit {tmp_path / 'way_out.py'}")
    nvim.input("ix = ")
    return nvim


@pytest.mark.parametrize(("options", "said"), [
    ({"n_predic": 64}, "local-copilot: bad option: Object contains unknown field `n_predic` - at `$`; "
                       "did you mean `n_predict`?"),
    ({"context": {"lines_befor": 20}}, "local-copilot: bad option: Object contains unknown field `lines_befor` - at "
                                       "`$.context`; did you mean `lines_before`?"),
    ({"log_level": "warning"}, "local-copilot: bad option: Invalid enum value 'warning' - at `$.log_level`; "
                               "did you mean 'warn'? It takes one of: 'debug', 'info', 'warn', 'error'"),
    ({"backends": {"team": {"kind": "vllm", "url": "http://127.0.0.1:8000"}}},
     "local-copilot: bad option: unknown kind 'vllm' - at `$.backends.team.kind`; 'vllm' servers speak kind 'openai'; "
     "choose one of: llama.cpp, lmstudio, ollama, openai, sglang"),
], ids=["unknown-field", "unknown-nested-field", "enum", "vllm-as-kind"])
def test_a_bad_option_says_the_right_one(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path,
                                         options: dict[str, Any], said: str) -> None:
    nvim = typing(nvim_bin, manifest, nvim_env, tmp_path, {"backends": {"llama.cpp": {"url": f"http://127.0.0.1:{free_port()}"}},
                                                           **options})
    try:
        assert shown(nvim) == said
        assert lua(nvim, "require('local_copilot').status()") == "bad option"
    finally:
        nvim.close()


def test_a_misspelt_keymap_is_reported_and_maps_nothing(nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
                                                        tmp_path: Path) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, columns=COLUMNS)
    try:
        attach_ui(nvim, COLUMNS, 24)
        before = nvim.funcs.maparg("<Tab>", "i", False, True)  # Neovim's own (a snippet's next field)
        nvim.exec_lua("require('local_copilot').setup({ keymaps = { acept = '<Tab>' } })")
        assert shown(nvim) == ("local-copilot: bad option: keymaps.acept is no action; did you mean accept?; the actions are "
                               "accept, accept_line, accept_word, dismiss, next, next_edit_accept, next_edit_dismiss, "
                               "prev, trigger")
        assert lua(nvim, "require('local_copilot').status()") == "bad option"
        # nothing was taken: <Tab> is what it was, a plain Tab here
        assert nvim.funcs.maparg("<Tab>", "i", False, True) == before
        nvim.command(f"edit {tmp_path / 'tab.txt'}")
        nvim.input("i<Tab>x")
        wait_for(lambda: nvim.current.buffer[:] == ["\tx"], what="a plain Tab typed")
    finally:
        nvim.close()


def test_the_first_cannot_reach_says_how_to_start_the_server(nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
                                                              tmp_path: Path) -> None:
    port = free_port()
    nvim = typing(nvim_bin, manifest, nvim_env, tmp_path, {"backends": {"llama.cpp": {"url": f"http://127.0.0.1:{port}"}}})
    try:
        assert shown(nvim) == (f"local-copilot: llama.cpp: cannot reach http://127.0.0.1:{port} (ConnectError); start it with "
                               f":LocalCopilotBackend start llama.cpp, or run llama-server --fim-qwen-1.5b-default --port {port}")
    finally:
        nvim.close()


def test_a_server_on_another_machine_gets_no_start_hint(nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
                                                       tmp_path: Path) -> None:
    # (192.0.2.0/24 is TEST-NET-1: no host answers there; the connect fails at once or times out)
    nvim = typing(nvim_bin, manifest, nvim_env, tmp_path, {"backends": {"llama.cpp": {"url": "http://192.0.2.1:9", "timeout_ms": 300}}})
    try:
        line = shown(nvim)
        assert line.startswith("local-copilot: llama.cpp:") and "LocalCopilotBackend" not in line, line
    finally:
        nvim.close()


ERROR = {"code": 500, "message": "slot unavailable", "type": "server_error"}


@pytest.mark.parametrize("error_event", [
    b'error: {"code":500,"message":"slot unavailable","type":"server_error"}\n\n',  # llama-server's own form
    sse({"error": ERROR}),  # an OpenAI-style error event
], ids=["error-field", "data-error"])
def test_a_servers_own_error_text_is_shown(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path,
                                           error_event: bytes) -> None:
    fake = FakeServer(lambda path, body: (200, llama_props()) if path == "/props"
                      else (200, [sse({"content": "ok", "stop": False}), error_event]))
    try:
        nvim = typing(nvim_bin, manifest, nvim_env, tmp_path, {"backends": {"llama.cpp": {"url": fake.url}}, "debounce_ms": 0})
        try:
            line = shown(nvim)
            assert line.endswith(": slot unavailable"), line
            assert "code" not in line and "{" not in line, line
        finally:
            nvim.close()
    finally:
        fake.close()
