"""A backend kind is one record in the registry: a toy kind registered through it alone is
configured, reached and checked like the built-in ones, against a loopback FAKE server that
speaks the toy's (made-up) protocol; another, whose FAKE server follows OpenAI's published
formats, also gets :checkhealth's report, instruction edits and next edits, with nothing of
the plugin naming it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from local_copilot.backends import registry
from local_copilot.backends.base import Chunk, FimRequest, HttpBackend, Wire
from local_copilot.backends.chat import ChatBackend, final_event
from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.errors import ConfigError
from local_copilot.health.report import Report, Section, collect
from local_copilot.instruct.prompt import EditSpec
from local_copilot.servers.backend_manager import BackendManager, _healthy
from local_copilot.servers.ports import free_port
from local_copilot.snapshot import Snapshot
from local_copilot.transport.streaming import NDJSONParser, SSEParser

from ..fakes.editor import RecordingEditor
from ..fakes.fake_chat import chat_sse
from ..fakes.fake_next_edit import answer_zeta2
from ..fakes.fake_server import FakeServer, Step, sse
from .test_engine import snap, wait_until


class _Piece(msgspec.Struct):
    text: str = ""
    end: bool = False


_decoder = msgspec.json.Decoder(_Piece)


class _Toy(HttpBackend):
    """What both toy kinds keep at its simplest: no stop strings, one candidate per request,
    no continuation, no context length known."""

    stop_strings: tuple[str, ...] = ()
    supports_n = False
    continues = False
    counts_full_prompt = False

    async def context_limit(self) -> int | None:
        return None


@contextlib.contextmanager
def registered(kind: registry.Kind) -> Iterator[registry.Kind]:
    """`kind` in the registry for one test, as a kind's module registers it at import."""
    try:
        yield registry.register(kind)
    finally:
        registry._KINDS.pop(kind.name, None)


class ToyBackend(_Toy):
    """The toy protocol: POST /toy/fill {before, after, max} -> NDJSON {"text"} lines, then
    {"end": true}; GET /toy/ready answers 200 once it serves."""

    def wire(self, req: FimRequest) -> Wire:
        body = {"before": req.prefix + req.middle, "after": req.suffix, "max": req.n_predict}
        return Wire("/toy/fill", body, NDJSONParser(), lambda payload: b'"end": true' in payload)

    def decode(self, payload: bytes) -> Chunk:
        msg = self._message(_decoder, payload)
        return Chunk(text=msg.text, done=msg.end)


@pytest.fixture()
def toy_kind() -> Iterator[registry.Kind]:
    with registered(registry.Kind(name="toy", dialect=ToyBackend, default_url="http://127.0.0.1:9",
                                  ready_path="/toy/ready")) as kind:
        yield kind


def toy_script(path: str, body: dict[str, Any]) -> tuple[int, list[Any]]:
    if path == "/toy/ready":
        return 200, [b'{"ok": true}']
    if path == "/toy/fill":
        return 200, [json.dumps({"text": "42"}).encode() + b"\n", json.dumps({"end": True}).encode() + b"\n"]
    return 404, [b'{"error": "no such path"}']


async def test_a_kind_registered_through_the_registry_alone_completes_and_is_checked(toy_kind: Any) -> None:
    server = FakeServer(toy_script)
    try:
        cfg = load_config({"backend": "mine", "backends": {"mine": {"kind": "toy", "url": server.url}}})
        editor = RecordingEditor()
        engine = Core(editor)
        engine.configure(cfg)
        engine.ghost.submit(snap(1))
        await wait_until(lambda: any(p.final for p in editor.plans))
        assert [p.text for p in editor.plans if p.final] == ["42"]
        path, body = [r for r in server.requests if r[0] == "/toy/fill"][0]
        assert body["before"] == "x = " and body["after"] == "\ny = 2"
        # the backend switcher's readiness check asks the kind's own path
        assert await _healthy(server.url, "toy")
        assert server.requests[-1][0] == "/toy/ready"
        await engine.close()
    finally:
        server.close()


def test_a_new_entry_of_a_kind_gets_the_kinds_default_url(toy_kind: Any) -> None:
    cfg = load_config({"backends": {"other": {"kind": "toy"}}})
    assert cfg.backends["other"].url == "http://127.0.0.1:9"


# the kinds built in today; a new kind's module adds itself to the registry, and to no list here
BUILT_IN = {"llama.cpp", "lmstudio", "ollama", "openai", "sglang"}


def test_an_unknown_kind_names_the_known_ones() -> None:
    assert set(registry.names()) >= BUILT_IN
    known = re.escape(", ".join(registry.names()))  # every registered kind, sorted
    with pytest.raises(ConfigError, match=rf"unknown kind 'tpy' - at `\$\.backends\.x\.kind`; choose one of: {known}$"):
        load_config({"backends": {"x": {"kind": "tpy"}}})


def test_the_built_in_kinds_say_where_they_are_ready() -> None:
    assert {k: registry.get(k).ready_path for k in sorted(BUILT_IN)} == {
        "llama.cpp": "/health", "ollama": "/api/version", "openai": "/v1/models", "sglang": "/health",
        "lmstudio": "/v1/models"}


async def test_a_server_that_is_not_there_is_not_healthy(toy_kind: Any) -> None:
    assert not await _healthy("http://127.0.0.1:9", "toy")


async def test_a_made_up_kind_gets_a_health_report_from_its_dialect(toy_kind: Any) -> None:
    server = FakeServer(toy_script)
    try:
        report = await collect({"backend": "mine", "backends": {"mine": {"kind": "toy", "url": server.url}}},
                               env={"PATH": ""}, probe_timeout=5.0)
    finally:
        server.close()
    sec = section(report, "backend mine (active)")
    assert not failed_checks(sec)
    assert item(sec, "reachable at")[0] == "ok" and "/toy/ready" in item(sec, "reachable at")[1]
    assert item(sec, "model: ") == ("ok", "model: (not named)")
    assert item(sec, "FIM probe")[1].startswith("FIM probe: '42'")


# -- a kind on OpenAI's published formats: every request kind --------------------------------------

TOY_MODEL = "zeta-2-toy-instruct"  # the name says the next-edit format (next_edit/formats.py)


class _Choice(msgspec.Struct):
    text: str = ""


class _Event(msgspec.Struct):
    choices: list[_Choice] = []
    error: Any = None


_events = msgspec.json.Decoder(_Event)


class ToyOpenAIBackend(_Toy):
    """A kind the plugin knows nothing of, on OpenAI's `/v1/completions`: {model, prompt,
    suffix, max_tokens, stream} -> SSE events with `choices[].text`, then `data: [DONE]`; a raw
    completion (next edits) is the same request without a suffix."""

    def wire(self, req: FimRequest) -> Wire:
        body = {"model": self.cfg.model, "prompt": req.prefix + req.middle, "suffix": req.suffix,
                "max_tokens": req.n_predict, "stream": True}
        return Wire("/v1/completions", body, SSEParser(), final_event)

    async def raw_wire(self, prompt: str, n_predict: int, stop: tuple[str, ...]) -> Wire:
        body = {"model": self.cfg.model, "prompt": prompt, "max_tokens": n_predict, "temperature": 0.0,
                "stream": True, "stop": list(stop)}
        return Wire("/v1/completions", body, SSEParser(), final_event)

    def decode(self, payload: bytes) -> Chunk:
        if payload == b"[DONE]":
            return Chunk(text="", done=True)
        msg = self._message(_events, payload)
        return Chunk(text="".join(c.text for c in msg.choices))


@pytest.fixture()
def toy_openai_kind() -> Iterator[registry.Kind]:
    # the chat dialect for instruction edits is the registry's record too
    with registered(registry.Kind(name="toy-openai", dialect=ToyOpenAIBackend, default_url="http://127.0.0.1:9",
                                  ready_path="/v1/models", chat=ChatBackend)) as kind:
        yield kind


def fake_openai(path: str, body: dict[str, Any]) -> tuple[int, list[Step]]:
    """A FAKE OpenAI-compatible server: `/v1/models`, `/v1/completions` (a FIM request, with
    a suffix, answers "42"; a raw one, the fake Zeta-2 model's edit) and `/v1/chat/completions`."""
    if path == "/v1/models":
        return 200, [json.dumps({"object": "list", "data": [{"id": TOY_MODEL, "object": "model"}]}).encode()]
    if path == "/v1/completions":
        text = "42" if "suffix" in body else answer_zeta2(body["prompt"])
        pieces = [text[i:i + 5] for i in range(0, len(text), 5)]
        return 200, [*(sse({"choices": [{"index": 0, "text": p, "finish_reason": None}]}) for p in pieces),
                     b"data: [DONE]\n\n"]
    if path == "/v1/chat/completions":
        return 200, chat_sse(["y = 1\n"])
    return 404, [b'{"error": "not found"}']


def section(report: Report, name: str) -> Section:
    return next(s for s in report.sections if s.name == name)


def item(sec: Section, start: str) -> tuple[str, str]:
    found = next(it for it in sec.items if it.message.startswith(start))
    return found.level, found.message


def failed_checks(sec: Section) -> list[str]:
    return [it.message for it in sec.items if it.message.startswith("the check itself failed")]


async def test_a_kind_on_openai_formats_completes_edits_and_suggests_next_edits(toy_openai_kind: Any) -> None:
    server = FakeServer(fake_openai)
    raw = {"backend": "mine", "backends": {"mine": {"kind": "toy-openai", "url": server.url, "model": TOY_MODEL}},
           "next_edit": {"enabled": True}}
    editor = RecordingEditor()
    engine = Core(editor)
    try:
        engine.configure(load_config(raw))
        # ghost text
        engine.ghost.submit(snap(1))
        await wait_until(lambda: any(p.final for p in editor.plans))
        assert editor.final == ["42"]
        fim = [b for p, b in server.requests if p == "/v1/completions" and "suffix" in b][0]
        assert fim["prompt"] == "x = " and fim["suffix"] == "\ny = 2"
        # an instruction edit, through the kind's chat dialect
        engine.edits.request(1, 7, EditSpec(path="a.py", ft="python", lines=["y = 2"], instruction="set y to 1"))
        await wait_until(lambda: any(u.state == "done" for u in editor.edits))
        done = next(u for u in editor.edits if u.state == "done")
        assert (done.id, done.lines) == (7, ["y = 1"])
        chat = [b for p, b in server.requests if p == "/v1/chat/completions"][0]
        assert chat["model"] == TOY_MODEL and chat["messages"][-1]["role"] == "user"
        # a next edit, on the kind's raw completions: a rename made above is made below too
        engine.next_edits.record("calc.py", 0, ["def area(w, h):"], ["def area(width, h):"])
        lines = ["def area(width, h):", "    return w * h", "", "print(area(2, 3))"]
        engine.next_edits.request(Snapshot(buf=2, tick=1, row=0, col=19, first=0, lines=lines, seq=1,
                                           path="calc.py"))
        await wait_until(lambda: bool(editor.next_edits))
        shown = editor.next_edits[0]
        assert (shown.row, shown.text) == (1, "idth")
        raw_body = [b for p, b in server.requests if p == "/v1/completions" and "suffix" not in b][0]
        assert raw_body["temperature"] == 0.0 and raw_body["stop"] == [">>>>>>> UPDATED"]
        assert not editor.notes, editor.notes
    finally:
        await engine.close()
        server.close()


async def test_a_kind_on_openai_formats_gets_the_whole_health_report(toy_openai_kind: Any) -> None:
    server = FakeServer(fake_openai)
    raw = {"backend": "mine", "backends": {"mine": {"kind": "toy-openai", "url": server.url, "model": TOY_MODEL}},
           "next_edit": {"enabled": True}}
    try:
        report = await collect(raw, env={"PATH": ""}, probe_timeout=5.0)
    finally:
        server.close()
    backend, edits, next_edits = (section(report, n) for n in ("backend mine (active)", "instruction edits",
                                                               "next edits"))
    for sec in (backend, edits, next_edits):
        assert not failed_checks(sec), sec
    assert item(backend, "reachable at")[0] == "ok"
    assert item(backend, "model: ") == ("ok", f"model: {TOY_MODEL}")
    assert item(backend, "FIM probe")[1].startswith("FIM probe: '42'")
    assert item(edits, "edits use backend mine (toy-openai at")[0] == "ok"
    level, message = item(next_edits, "next-edit probe")
    assert level == "ok" and "zeta2 format, detected" in message and "an edit at line 2" in message


# -- a kind with its own launcher: started by :LocalCopilotBackend's manager, then used ---------

# a FAKE server of the toy protocol, started as a program by the kind's launch recipe: GET
# /toy/ready answers once it serves, POST /toy/fill answers "42" and writes each body to argv[2]
TOY_SERVER = """
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.answer(200 if self.path == "/toy/ready" else 404, b'{"ok": true}')
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path != "/toy/fill":
            return self.answer(404, b"{}")
        with open(sys.argv[2], "ab") as f:
            f.write(body + b"\\n")
        self.answer(200, json.dumps({"text": "42"}).encode() + b"\\n" + json.dumps({"end": True}).encode() + b"\\n")
    def answer(self, code, body):
        self.send_response(code)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


async def test_a_kind_with_its_own_launcher_is_started_and_answers(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind defined here alone, launcher included: its built-in entry, its recipe, the
    manager that :LocalCopilotBackend drives starting its server, the supervisor waiting on
    its ready path, ghost text through its dialect, and the server stopped."""
    from local_copilot.backends.launch import Recipe

    monkeypatch.setenv("LOCAL_COPILOT_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    program, bodies, port = tmp_path / "toy_server.py", tmp_path / "bodies", free_port()
    program.write_text(TOY_SERVER)

    def launch(name: str, cfg: Any, opts: Any, port: int, facts: Any) -> Recipe:
        return Recipe(backend=name, kind="toy-launched", argv=[sys.executable, str(program), str(port), str(bodies)],
                      port=port, url=f"http://127.0.0.1:{port}", health_path="/toy/ready", startup_timeout_s=30.0)

    kind = registry.Kind(name="toy-launched", dialect=ToyBackend, default_url=f"http://127.0.0.1:{port}",
                         ready_path="/toy/ready", recipe="toy-launched", launch=launch, builtin=True,
                         manual=lambda model, port: f"toy-server {port}")
    notes: list[str] = []
    ready: list[str] = []
    with registered(kind):
        cfg = load_config({"backend": "toy-launched"})  # the entry the kind brings, at its default URL
        assert cfg.active.kind == "toy-launched" and cfg.active.url == f"http://127.0.0.1:{port}"
        assert "toy-launched" in registry.recipes()
        assert not await _healthy(cfg.active.url, "toy-launched")
        manager = BackendManager(lambda msg, level: notes.append(msg), lambda change: None, ready.append)
        editor = RecordingEditor()
        engine = Core(editor)
        try:
            manager.switch(cfg, "toy-launched")
            await wait_until(lambda: bool(ready), timeout=60.0)
            assert ready == ["toy-launched"], notes
            assert any(n.startswith("local-copilot: starting toy-launched") for n in notes), notes
            assert any(n.startswith("local-copilot: using toy-launched at") for n in notes), notes
            assert manager.server_state("toy-launched")["state"] == "ready"
            engine.configure(cfg)
            engine.ghost.submit(snap(1))
            await wait_until(lambda: any(p.final for p in editor.plans), timeout=10.0)
            assert [p.text for p in editor.plans if p.final] == ["42"]
            sent = json.loads(bodies.read_bytes().splitlines()[0])
            assert sent["before"] == "x = " and sent["after"] == "\ny = 2"
        finally:
            await engine.close()
            stopped = await asyncio.to_thread(manager.supervisors["toy-launched"].stop) \
                if "toy-launched" in manager.supervisors else False
            manager.close()
        assert stopped
        assert not await _healthy(cfg.active.url, "toy-launched")
