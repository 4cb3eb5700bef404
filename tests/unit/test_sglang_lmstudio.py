"""SGLang and LM Studio: built-in entries, the completion and chat paths, telling each apart
from other servers by what only it answers, and their launch recipes. Against NAMED loopback
fakes that follow their documented APIs (tests/fakes/fake_sglang.py, fake_lmstudio.py): neither
server runs on these machines."""

from __future__ import annotations

import asyncio
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_copilot.backend_bench.cli import parse_target
from local_copilot.backends import FimRequest, make_backend, registry
from local_copilot.backends.detect import detect
from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.errors import ConfigError, ProtocolError, ServerStartError, TokenRefused
from local_copilot.health.kinds import kind_items
from local_copilot.instruct.chat import ChatBackend, chat_backend
from local_copilot.server_options import ServerOptions
from local_copilot.servers.host_facts import HostFacts
from local_copilot.servers.ports import free_port
from local_copilot.servers.recipes import build_recipe
from local_copilot.servers.supervisor import Supervisor
from local_copilot.transport.access import async_client

from ..fakes.editor import RecordingEditor
from ..fakes.fake_lmstudio import fake_lmstudio
from ..fakes.fake_server import FakeServer, infill_stream, llama
from ..fakes.fake_sglang import fake_sglang
from .test_engine import snap, wait_until

QWEN = "Qwen/Qwen2.5-Coder-1.5B"


@pytest.fixture()
def servers() -> Iterator[list[FakeServer]]:
    made: list[FakeServer] = []
    yield made
    for s in made:
        s.close()


def completions(server: FakeServer) -> list[dict[str, Any]]:
    return [body for path, body in server.requests if path == "/v1/completions"]


async def suggestion(raw: dict[str, Any]) -> tuple[str, Core]:
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config(raw))
    engine.ghost.submit(snap(1))
    await wait_until(lambda: any(p.final for p in editor.plans) or bool(editor.notes))
    assert not editor.notes, editor.notes
    await engine.close()
    return editor.final[0], engine


def test_both_are_built_in_entries_at_their_default_ports() -> None:
    cfg = load_config({})
    assert (cfg.backends["sglang"].kind, cfg.backends["sglang"].url) == ("sglang", "http://127.0.0.1:30000")
    assert (cfg.backends["lmstudio"].kind, cfg.backends["lmstudio"].url) == ("lmstudio", "http://127.0.0.1:1234")
    # options given for them merge over the defaults, as for the other built-in entries
    assert load_config({"backends": {"sglang": {"model": QWEN}}}).backends["sglang"].url == "http://127.0.0.1:30000"


# -- SGLang --------------------------------------------------------------------------------------


async def test_sglang_completes_with_the_fim_prompt_rendered_here(servers: list[FakeServer]) -> None:
    server = fake_sglang(QWEN)
    servers.append(server)
    text, _ = await suggestion({"backend": "sglang", "backends": {"sglang": {"url": server.url}}})
    assert text == "print(x)"
    body = completions(server)[0]
    assert body["model"] == QWEN
    assert body["prompt"] == "<|fim_prefix|><|fim_suffix|>\ny = 2<|fim_middle|>x = "  # the typed text last
    # SGLang drops special tokens from the text unless told not to: the stop strings name them
    assert body["skip_special_tokens"] is False and "<|fim_middle|>" in body["stop"]
    assert body["stream"] is True


async def test_sglang_serves_instruction_edits_and_refuses_a_wrong_token_by_name(
        servers: list[FakeServer], monkeypatch: pytest.MonkeyPatch) -> None:
    server = fake_sglang(QWEN, ["y = 1"], key="sk-sgl-5d1e")
    servers.append(server)
    monkeypatch.setenv("SGL_KEY", "sk-sgl-5d1e")
    cfg = load_config({"backends": {"sglang": {"url": server.url, "api_key_env": "SGL_KEY"}}}).backends["sglang"]
    async with async_client([cfg], timeout=5.0) as client:
        chat = chat_backend("sglang", cfg, client)
        assert type(chat) is ChatBackend
        exchange = await chat.chat([{"role": "user", "content": "set y"}], 8, 0.0)
        assert "".join([c.text async for c in exchange.chunks()]) == "y = 1"
        chat.close()
    assert server.requests[-1][1]["_headers"]["authorization"] == "Bearer sk-sgl-5d1e"
    monkeypatch.setenv("SGL_KEY", "sk-wrong-77a0")
    async with async_client([cfg], timeout=5.0) as client:
        backend = make_backend("sglang", cfg, client)
        with pytest.raises(TokenRefused, match=r"^sglang: the server refused the token in \$SGL_KEY \(401: Unauthorized\)$"):
            async for _ in backend.complete(FimRequest(prefix="", middle="a", suffix="", n_predict=4)):
                pass
        backend.close()


# -- LM Studio -----------------------------------------------------------------------------------


async def test_lmstudio_completes_with_the_loaded_model_and_its_loaded_context(servers: list[FakeServer]) -> None:
    server = fake_lmstudio({"qwen2.5-coder-1.5b-instruct": "not-loaded", "qwen2.5-coder-7b": "loaded"},
                           loaded_context=8192)
    servers.append(server)
    raw = {"backend": "lmstudio", "backends": {"lmstudio": {"url": server.url}}}
    text, _ = await suggestion(raw)
    assert text == "print(x)"
    body = completions(server)[0]
    assert body["model"] == "qwen2.5-coder-7b"  # the one loaded, not the first listed
    assert body["prompt"] == "<|fim_prefix|><|fim_suffix|>\ny = 2<|fim_middle|>x = "  # the typed text last
    cfg = load_config(raw).backends["lmstudio"]
    async with async_client([cfg], timeout=5.0) as client:
        backend = make_backend("lmstudio", cfg, client)
        assert await backend.context_limit() == 8192
        assert backend.supports_n is False  # one choice per request: alternatives one by one
        backend.close()


async def test_lmstudio_loads_a_configured_model_and_says_when_none_is_loaded(servers: list[FakeServer]) -> None:
    server = fake_lmstudio({"qwen2.5-coder-1.5b": "not-loaded"})
    servers.append(server)
    text, _ = await suggestion({"backend": "lmstudio",
                                "backends": {"lmstudio": {"url": server.url, "model": "qwen2.5-coder-1.5b"}}})
    assert text == "print(x)" and completions(server)[0]["model"] == "qwen2.5-coder-1.5b"
    other = fake_lmstudio({"qwen2.5-coder-1.5b": "not-loaded"})
    servers.append(other)
    cfg = load_config({"backends": {"lmstudio": {"url": other.url}}}).backends["lmstudio"]
    async with async_client([cfg], timeout=5.0) as client:
        backend = make_backend("lmstudio", cfg, client)
        with pytest.raises(ProtocolError, match=r"LM Studio has no model loaded; load one \(`lms load MODEL`\) or set "
                                                r"backends.lmstudio.model"):
            await backend.context_limit()
        backend.close()


# -- telling them apart ------------------------------------------------------------------------


async def test_each_is_told_apart_by_what_only_it_answers(servers: list[FakeServer]) -> None:
    sgl = fake_sglang(QWEN)
    lms = fake_lmstudio({"qwen2.5-coder-7b": "loaded"})
    other = FakeServer(llama(infill_stream(["a"])))
    servers.extend([sgl, lms, other])
    found = {}
    for name, server in (("sgl", sgl), ("lms", lms), ("other", other)):
        cfg = load_config({"backends": {name: {"kind": "openai", "url": server.url}}}).backends[name]
        async with async_client([cfg], timeout=5.0) as client:
            found[name] = await detect(client, cfg)
    assert found == {"sgl": ("sglang", f"SGLang serving {QWEN}"), "lms": ("lmstudio", "LM Studio, loaded: qwen2.5-coder-7b"),
                     "other": None}
    # :checkhealth: an entry of kind 'openai' on SGLang is told which kind fits it
    cfg = load_config({"backends": {"team": {"kind": "openai", "url": sgl.url}}}).backends["team"]
    async with async_client([cfg], timeout=5.0) as client:
        (item,) = await kind_items("team", cfg, client)
    assert item.level == "info" and item.message == f"the server is SGLang serving {QWEN}, and backends['team'] has " \
                                                    "kind 'openai'"
    assert item.advice == ["kind = 'sglang' fits it (its own probes and request fields)"]
    # an entry of the right kind is confirmed; one whose server is another kind is warned about
    for name, url, want in (("sglang", sgl.url, ("ok", f"server: SGLang serving {QWEN}")),
                            ("lmstudio", other.url, ("warn", "kind 'lmstudio', but the server does not answer "
                                                             "/api/v0/models as such a server does"))):
        cfg = load_config({"backends": {name: {"url": url}}}).backends[name]
        async with async_client([cfg], timeout=5.0) as client:
            (item,) = await kind_items(name, cfg, client)
        assert (item.level, item.message) == want
    # the bench's bare URL: LM Studio answers every unknown path with 200 (its own error text),
    # so /props alone took it for llama.cpp
    assert (await asyncio.to_thread(parse_target, f"mine={lms.url}", {})).cfg.kind == "lmstudio"
    assert (await asyncio.to_thread(parse_target, f"mine={sgl.url}", {})).cfg.kind == "sglang"


# -- launch recipes ------------------------------------------------------------------------------


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_the_sglang_recipe(tmp_path: Path) -> None:
    python = script(tmp_path / "python", "exit 0")  # a python that has SGLang
    cfg = load_config({"backends": {"sglang": {"model": QWEN, "server": {"python": str(python)}}}}).backends["sglang"]
    r = build_recipe("sglang", cfg, cfg.server, HostFacts())
    assert r.argv == [str(python), "-m", "sglang.launch_server", "--model-path", QWEN, "--port", "30000",
                      "--host", "127.0.0.1"]
    assert (r.kind, r.health_path, r.detached, r.url) == ("sglang", "/health", False, "http://127.0.0.1:30000")
    without = script(tmp_path / "bare-python", "exit 1")
    cfg = load_config({"backends": {"sglang": {"model": QWEN, "server": {"python": str(without)}}}}).backends["sglang"]
    with pytest.raises(ServerStartError, match=r"sglang: SGLang is not installed in .*bare-python; install it: pip "
                                               r"install 'sglang\[all\]'"):
        build_recipe("sglang", cfg, cfg.server, HostFacts())
    # any entry may use it: server.recipe names it
    cfg = load_config({"backends": {"gpu": {"kind": "openai", "url": "http://127.0.0.1:30001", "model": QWEN,
                                            "server": {"recipe": "sglang", "python": str(python)}}}}).backends["gpu"]
    assert build_recipe("gpu", cfg, cfg.server, HostFacts()).argv[1:3] == ["-m", "sglang.launch_server"]


def test_an_unknown_recipe_names_the_known_ones() -> None:
    # servers/recipes.py's own, then the kinds' (a new kind with a launcher adds its own)
    assert registry.recipes()[:3] == ["llama.cpp", "vllm", "ollama"] and {"lmstudio", "sglang"} <= set(registry.recipes())
    known = re.escape(", ".join(registry.recipes()))
    with pytest.raises(ConfigError, match=rf"unknown recipe 'sglng' - at `\$\.backends\.x\.server\.recipe`; choose one "
                                          rf"of: {known}, none$"):
        load_config({"backends": {"x": {"server": {"recipe": "sglng"}}}})


def test_lms_server_start_is_run_and_its_server_waited_for(tmp_path: Path) -> None:
    """`lms server start` hands the server to LM Studio and returns: the supervisor runs it to
    its end, then waits until the server answers; the server is LM Studio's, not supervised."""
    port = free_port()
    started = tmp_path / "started"
    # the fake lms starts a server in the background and returns, as LM Studio's does
    (tmp_path / "bin").mkdir()
    lms = script(tmp_path / "bin" / "lms", (
        f'echo "$@" > {started}\n'
        f'{sys.executable} -c "import http.server, json\n'
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        body = json.dumps({'data': [{'id': 'm', 'object': 'model'}]}).encode()\n"
        "        self.send_response(200); self.send_header('content-length', str(len(body))); self.end_headers()\n"
        "        self.wfile.write(body)\n"
        "    def log_message(self, *a): pass\n"
        f"http.server.HTTPServer(('127.0.0.1', {port}), H).serve_forever()\" > /dev/null 2>&1 &\n"
        f"echo $! > {tmp_path / 'pid'}\n"
        "echo 'Success! Server is now running'"))
    cfg = load_config({"backends": {"lmstudio": {"url": f"http://127.0.0.1:{port}"}}}).backends["lmstudio"]
    env = {**os.environ, "PATH": f"{lms.parent}:{os.environ['PATH']}", "LOCAL_COPILOT_RUNTIME_DIR": str(tmp_path / "run"),
           "LOCAL_COPILOT_LOG_DIR": str(tmp_path / "log")}
    sup = Supervisor("lmstudio", cfg, ServerOptions(), env=env)
    try:
        recipe = sup.recipe
        assert recipe.argv == [str(lms), "server", "start", "--port", str(port)] and recipe.detached
        status = sup.start()
        assert started.read_text().split() == ["server", "start", "--port", str(port)]
        assert status.state == "external"  # LM Studio's server: nothing supervises or stops it here
        assert httpx.get(f"http://127.0.0.1:{port}/v1/models").status_code == 200
        assert sup.stop() is False
    finally:
        pid = (tmp_path / "pid").read_text().strip() if (tmp_path / "pid").exists() else ""
        if pid:
            os.kill(int(pid), 15)
