"""llama-server's router mode (issue 37): one server, several models, each loaded when a request
names it (`llama-server --models-dir DIR`). A real router serving two tiny models; a recording
proxy in front of it shows what the plugin sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.devtools.tiny_model import write_gguf
from local_copilot.servers.llama_cpp import LlamaServer, free_port

from ..conftest import PHRASE
from ..fakes.editor import RecordingEditor
from ..fakes.recording_proxy import RecordingProxy
from ..helpers import wait_for
from ..unit.test_engine import snap, wait_until
from .nvim_session import start_nvim

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def router(llama_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    d = tmp_path_factory.mktemp("router")
    (d / "models").mkdir()
    write_gguf(d / "models" / "tiny-x.gguf", favor="x")
    write_gguf(d / "models" / "phrase.gguf", phrase=PHRASE)
    port = free_port()
    # the router's children are llama-servers too; each gets the tiny models' context and one
    # thread (a busy 2-core machine stalls several spinning threads)
    argv = [llama_bin, "--models-dir", str(d / "models"), "--host", "127.0.0.1", "--port", str(port),
            "-c", "2048", "-t", "1", "--models-max", "2"]
    with LlamaServer(argv, port=port, log_file=d / "router.log") as server:
        yield server


@pytest.fixture()
def proxy(router: LlamaServer) -> Iterator[RecordingProxy]:
    p = RecordingProxy(router.port)
    yield p
    p.close()


def entry(url: str, model: str = "") -> dict[str, Any]:
    return {"kind": "llama.cpp", "url": url, **({"model": model} if model else {})}


async def first_suggestion(core: Core, editor: RecordingEditor) -> str:
    """Ask as Lua does while the server loads the model: again until a suggestion comes."""
    seq = 0

    def shown() -> bool:
        nonlocal seq
        if editor.final:
            return True
        if not any(core.state(1).in_flight().values()):
            seq += 1
            core.ghost.submit(snap(seq, "x = "))
        return False

    await wait_until(shown, timeout=60)
    return editor.final[-1]


async def test_an_entry_naming_a_model_gets_it_from_the_router(proxy: RecordingProxy) -> None:
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config({"backend": "x", "speculative": False, "n_predict": 6,
                                "backends": {"x": entry(proxy.url, "tiny-x")}}))
    try:
        assert await first_suggestion(core, editor) == "xxxxxx"
    finally:
        await core.close()
    # the model is named in every probe and request
    paths = [p for p, _ in proxy.requests]
    assert "/props?model=tiny-x" in paths and "/props" not in paths
    assert all(b.get("model") == "tiny-x" for b in proxy.bodies("/tokenize")) and proxy.bodies("/tokenize")
    assert all(b["model"] == "tiny-x" for b in proxy.bodies("/completion")) and proxy.bodies("/completion")
    # while the router loaded it the status said so, and no message or failure was shown
    assert editor.notes == []
    # (the router starts with every model unloaded)
    assert editor.states[0] == "loading" and editor.states[-1] == "ok" and "down" not in editor.states, editor.states


async def test_two_entries_on_one_router_use_their_own_models(router: LlamaServer) -> None:
    texts = {}
    for model in ("tiny-x", "phrase"):
        editor = RecordingEditor()
        core = Core(editor)
        core.configure(load_config({"backend": model, "speculative": False, "n_predict": 6,
                                    "backends": {model: entry(router.url, model)}}))
        try:
            texts[model] = await first_suggestion(core, editor)
        finally:
            await core.close()
    assert texts["tiny-x"] == "xxxxxx" and texts["phrase"] and "x" not in texts["phrase"]


async def test_a_router_without_a_model_named_says_which_to_name(router: LlamaServer) -> None:
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config({"backend": "team", "speculative": False, "backends": {"team": entry(router.url)}}))
    try:
        core.ghost.submit(snap(1, "x = "))
        await wait_until(lambda: bool(editor.notes), timeout=30)
    finally:
        await core.close()
    [(message, _)] = editor.notes
    assert "is a llama-server router serving several models; set backends.team.model to one of:" in message
    assert "phrase" in message and "tiny-x" in message


def test_status_says_the_model_is_loading(nvim_bin: str, manifest: Path, nvim_env: dict[str, str]) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={})
    try:
        nvim.command("enew")
        nvim.exec_lua("require('local_copilot')._backend_state('loading', 'qwen2.5-coder-7b')")
        assert nvim.exec_lua("return require('local_copilot').status()") == "loading qwen2.5-coder-7b"
        nvim.exec_lua("require('local_copilot')._backend_state('ok', '')")
        wait_for(lambda: nvim.exec_lua("return require('local_copilot').status()") == "idle", what="idle")
    finally:
        nvim.close()
