"""llama-server's router mode (issue 37): one server, several models, each loaded when a request
names it (`llama-server --models-dir DIR`). A real router serving three tiny models; a recording
proxy in front of it shows what the plugin sent. Also: `:LocalCopilotBackend model NAME` and its
completion, `server.models_dir` (the plugin starts the router), and `doctor` listing the models."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.devtools.tiny_model import write_gguf
from local_copilot.health.report import collect
from local_copilot.instruct.prompt import EditSpec
from local_copilot.servers.llama_cpp import LlamaServer, free_port
from local_copilot.snapshot import Snapshot

from ..conftest import PHRASE
from ..fakes.editor import RecordingEditor
from ..fakes.recording_proxy import RecordingProxy
from ..helpers import wait_for
from ..unit.test_engine import snap, wait_until
from .nvim_session import start_nvim, wait_ghost

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def router(llama_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    d = tmp_path_factory.mktemp("router")
    (d / "models").mkdir()
    write_gguf(d / "models" / "tiny-x.gguf", favor="x")
    write_gguf(d / "models" / "phrase.gguf", phrase=PHRASE)
    write_gguf(d / "models" / "nl.gguf", favor="\n")
    # a model file cut short: listed by the router, its load fails
    (d / "models" / "broken.gguf").write_bytes((d / "models" / "nl.gguf").read_bytes()[:100_000])
    port = free_port()
    # the router's children are llama-servers too; each gets the tiny models' context and one
    # thread (a busy 2-core machine stalls several spinning threads)
    argv = [llama_bin, "--models-dir", str(d / "models"), "--host", "127.0.0.1", "--port", str(port),
            "-c", "2048", "-t", "1", "--models-max", "3"]
    with LlamaServer(argv, port=port, log_file=d / "router.log") as server:
        yield server


@pytest.fixture()
def upstream(router: LlamaServer) -> LlamaServer:
    """What `proxy` (conftest.py) stands in front of."""
    return router


def entry(url: str, model: str = "") -> dict[str, Any]:
    return {"kind": "llama.cpp", "url": url, **({"model": model} if model else {})}


async def ask_until(core: Core, done: Callable[[], bool]) -> int:
    """Ask as Lua does while the status says 'loading': again whenever nothing is in flight,
    until `done()`. Returns the last snapshot's number."""
    seq = 0

    def asked() -> bool:
        nonlocal seq
        if done():
            return True
        if not any(core.state(1).in_flight().values()):
            seq += 1
            core.ghost.submit(snap(seq, "x = "))
        return False

    await wait_until(asked, timeout=60)
    return seq


async def first_suggestion(core: Core, editor: RecordingEditor) -> str:
    """Asked again while the server loads the model, until a suggestion comes."""
    await ask_until(core, lambda: bool(editor.final))
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


def unload_all(url: str) -> None:
    """Every model back to `unloaded` (POST /models/unload), so a test sees each one load."""
    for m in httpx.get(url + "/models", timeout=5).json()["data"]:
        if m["status"]["value"] != "unloaded":
            httpx.post(url + "/models/unload", json={"model": m["id"]}, timeout=30)
    wait_for(lambda: all(m["status"]["value"] == "unloaded" for m in httpx.get(url + "/models", timeout=5).json()["data"]),
             timeout=30, what="every model unloaded")


async def test_ghost_text_edits_and_next_edits_use_their_own_models_of_one_router(
        router: LlamaServer, proxy: RecordingProxy, tmp_path: Path) -> None:
    """Three entries share the router's URL and differ in `model`: ghost text asks `phrase`,
    instruction edits (edit.backend) `tiny-x` on the chat endpoint, next edits (next_edit.backend)
    `nl`. Each model is unloaded when the test starts: each request waits for its own."""
    unload_all(router.url)
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config({
        "backend": "fim", "speculative": False, "n_predict": 6,
        "backends": {"fim": entry(proxy.url, "phrase"), "inst": entry(proxy.url, "tiny-x"),
                     "ne": entry(proxy.url, "nl")},
        "edit": {"backend": "inst", "n_predict": 8},
        "next_edit": {"enabled": True, "backend": "ne", "format": "zeta"},
    }))
    try:
        ghost = await first_suggestion(core, editor)

        spec = EditSpec(path="a.py", ft="python", lines=["def f():", "    pass"], before=[], after=[],
                        instruction="return 1")
        core.edits.request(1, 7, spec)
        await wait_until(lambda: any(u.state in ("done", "error") for u in editor.edits), timeout=60)

        path = tmp_path / "calc.py"
        lines = ["def area(width, h):", "    return w * h"]
        path.write_text("\n".join(lines) + "\n")
        core.next_edits.record(str(path), 0, ["def area(w, h):"], ["def area(width, h):"])
        seq = 0

        def next_edit_answered() -> bool:
            nonlocal seq
            if any(b.get("model") == "nl" for b in proxy.bodies("/completion")):
                return not any(core.state(1).in_flight().values())
            task = core.state(1).next_edit
            if task is None or task.done():  # (while `nl` loads nothing is sent: ask again, as a change would)
                seq += 1
                core.next_edits.request(Snapshot(buf=1, tick=seq, row=0, col=9, first=0, lines=lines, nlines=2,
                                                 ft="python", path=str(path), seq=seq), cwd=str(tmp_path))
            return False

        await wait_until(next_edit_answered, timeout=60)
    finally:
        await core.close()
    # what the user saw: the phrase model's ghost text, the tiny-x model's edit (it writes x's),
    # the edit's preview saying the model loads meanwhile, and no message at all
    assert ghost and "x" not in ghost
    done = editor.edits[-1]
    assert done.state == "done" and done.lines == ["x" * 8], done
    assert any(u.state == "waiting" and u.message == "the server is loading tiny-x" for u in editor.edits)
    assert editor.notes == []
    # what the router got: each request named its entry's model
    assert {b["model"] for b in proxy.bodies("/v1/chat/completions")} == {"tiny-x"}
    assert {b["model"] for b in proxy.bodies("/completion")} == {"phrase", "nl"}
    # (the next-edit request is not probed first: the router holds it while `nl` loads)
    props = {p for p, _ in proxy.requests if p.startswith("/props")}
    assert props == {"/props?model=phrase", "/props?model=tiny-x"}


async def test_a_model_the_router_cannot_load_is_one_message_not_loading_for_ever(proxy: RecordingProxy) -> None:
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config({"backend": "x", "speculative": False,
                                "backends": {"x": entry(proxy.url, "broken")}}))
    try:
        seq = await ask_until(core, lambda: bool(editor.notes))
        for i in range(3):  # the keys after it: no more loads asked, no more messages
            core.ghost.submit(snap(seq + 1 + i, "x = "))
            await wait_until(lambda: not any(core.state(1).in_flight().values()), timeout=10)
    finally:
        await core.close()
    [(message, level)] = editor.notes
    assert "x: the server could not load broken (its llama-server exited with code 1)" in message, level
    assert editor.states[0] == "loading" and editor.states[-1] != "loading", editor.states
    assert [b for b in proxy.bodies("/models/load")] == [{"model": "broken"}]


async def test_doctor_lists_the_routers_models_with_their_state(router: LlamaServer) -> None:
    unload_all(router.url)
    report = await collect({"backend": "team", "backends": {"team": entry(router.url, "tiny-x")}}, editor=False)
    [section] = [s for s in report.sections if s.name == "backend team (active)"]
    said = [i.message for i in section.items]
    # listed with the state the router said (the checks run at once: another may have asked for
    # tiny-x already), and the entry's model waited for while it loaded
    [listed] = [m for m in said if m.startswith("the server serves 4 models: broken (")]
    assert "nl (unloaded), phrase (unloaded), tiny-x (" in listed, listed
    assert "model: tiny-x" in said and not [i for i in section.items if i.level == "error"], section.items
    # a model the router does not have is named as such, with the ones it has
    report = await collect({"backend": "team", "backends": {"team": entry(router.url, "tiny-y")}}, editor=False)
    [section] = [s for s in report.sections if s.name == "backend team (active)"]
    [bad] = [i for i in section.items if "is not one of them" in i.message]
    assert bad.level == "error" and "backends['team'].model = 'tiny-y'" in bad.message


def test_backend_model_command_starts_a_router_from_a_models_folder_and_switches_its_model(
        llama_bin: str, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    """`server.models_dir`: :LocalCopilotBackend starts a router-mode llama-server; `:LocalCopilotBackend
    model` completes the router's models and sets the entry's model; the next suggestion is the
    other model's."""
    folder = tmp_path / "models"
    folder.mkdir()
    write_gguf(folder / "tiny-x.gguf", favor="x")
    write_gguf(folder / "phrase.gguf", phrase=PHRASE)
    empty = tmp_path / "empty"
    empty.mkdir()
    url = f"http://127.0.0.1:{free_port()}"
    server = {"context_tokens": 2048, "parallel": 1, "extra_args": ["-t", "1"]}
    env = dict(nvim_env, LOCAL_COPILOT_LLAMA_SERVER=llama_bin)
    nvim = start_nvim(nvim_bin, manifest, env, setup={
        "debounce_ms": 0, "adaptive_debounce": False, "n_predict": 4, "speculative": False,
        "backends": {"router": {"url": url, "model": "tiny-x", "server": {"models_dir": str(folder), **server}},
                     "bad": {"url": f"http://127.0.0.1:{free_port()}", "server": {"models_dir": str(empty)}}}})

    def messages() -> str:
        return nvim.exec_lua("return vim.fn.execute('messages')")

    try:
        nvim.exec_lua("vim.g.ready = nil; vim.api.nvim_create_autocmd('User', { pattern = 'LocalCopilotBackendReady',"
                      " callback = function(ev) vim.g.ready = ev.data.backend end })")
        # a folder without models: said before anything is launched
        nvim.command("LocalCopilotBackend start bad")
        wait_for(lambda: "server.models_dir" in messages(), timeout=30, what="the models_dir message")
        assert f"{empty} holds no .gguf model" in messages()

        nvim.command("LocalCopilotBackend router")
        wait_for(lambda: nvim.vars.get("ready") == "router", timeout=90, what="LocalCopilotBackendReady")
        pid = nvim.call("LocalCopilotCall", "backend_status")["server"]["pid"]
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert argv[1:3] == [b"--models-dir", str(folder).encode()] and b"-m" not in argv
        nvim.command(f"edit {tmp_path / 'a.py'}")
        nvim.input("ia = ")
        assert wait_ghost(nvim, lambda t: t == "xxxx", timeout=60) == "xxxx"
        nvim.input("<Esc>")
        # :checkhealth lists the router's models with their state
        health = nvim.call("LocalCopilotCall", "health")
        [section] = [sec for sec in health if sec["name"] == "backend router (active)"]
        said = [item["message"] for item in section["items"]]
        assert "the server serves 2 models: phrase (unloaded), tiny-x (loaded)" in said, said
        assert "models folder " + str(folder) + ": the server is started as a router-mode llama-server" in said, said

        # the completion lists the router's models; an unknown one is refused with them named
        assert nvim.call("getcompletion", "LocalCopilotBackend model ", "cmdline") == ["phrase", "tiny-x"]
        assert nvim.call("getcompletion", "LocalCopilotBackend model ph", "cmdline") == ["phrase"]
        assert "model" in nvim.call("getcompletion", "LocalCopilotBackend mo", "cmdline")
        nvim.command("LocalCopilotBackend model nope")
        wait_for(lambda: "has no model 'nope'" in messages(), timeout=30, what="the unknown-model message")
        assert "choose one of: phrase (unloaded), tiny-x (loaded)" in messages()

        nvim.command("LocalCopilotBackend model phrase")
        wait_for(lambda: "router uses model phrase" in messages(), timeout=30, what="the model set")
        assert nvim.call("LocalCopilotCall", "backend_status")["model"] == "phrase"
        nvim.input("ob = ")
        shown = wait_ghost(nvim, lambda t: bool(t) and "x" not in t, timeout=60)
        assert shown and shown in PHRASE, shown  # a part of what the phrase model writes
    finally:
        with contextlib.suppress(Exception):
            nvim.command("LocalCopilotBackend stop router")
            wait_for(lambda: not _answers(url), timeout=30, what="the router stopped")
        nvim.close()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
