"""A backend kind is one record in the registry: a toy kind registered through it alone is
configured, reached and checked like the built-in ones, against a loopback FAKE server that
speaks the toy's (made-up) protocol."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from local_copilot.servers.backend_manager import _healthy
from local_copilot.backends import registry
from local_copilot.backends.base import Chunk, FimRequest, HttpBackend, Wire
from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.errors import ConfigError
from local_copilot.transport.streaming import NDJSONParser

from ..fakes.fake_server import FakeServer
from ..fakes.editor import RecordingEditor
from .test_engine import snap, wait_until


class _Piece(msgspec.Struct):
    text: str = ""
    end: bool = False


_decoder = msgspec.json.Decoder(_Piece)


class ToyBackend(HttpBackend):
    """The toy protocol: POST /toy/fill {before, after, max} -> NDJSON {"text"} lines, then
    {"end": true}; GET /toy/ready answers 200 once it serves."""

    stop_strings: tuple[str, ...] = ()
    supports_n = False
    continues = False
    counts_full_prompt = False

    async def context_limit(self) -> int | None:
        return None

    def wire(self, req: FimRequest) -> Wire:
        body = {"before": req.prefix + req.middle, "after": req.suffix, "max": req.n_predict}
        return Wire("/toy/fill", body, NDJSONParser(), lambda payload: b'"end": true' in payload)

    def decode(self, payload: bytes) -> Chunk:
        msg = self._message(_decoder, payload)
        return Chunk(text=msg.text, done=msg.end)


@pytest.fixture()
def toy_kind() -> Any:
    kind = registry.register(registry.Kind(name="toy", dialect=ToyBackend, default_url="http://127.0.0.1:9",
                                           ready_path="/toy/ready"))
    yield kind
    registry._KINDS.pop("toy", None)


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


def test_an_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown kind 'tpy' - at `\$\.backends\.x\.kind`; choose one of: llama.cpp, lmstudio, ollama, openai, sglang"):
        load_config({"backends": {"x": {"kind": "tpy"}}})


def test_the_built_in_kinds_say_where_they_are_ready() -> None:
    assert {k: registry.get(k).ready_path for k in registry.names()} == {
        "llama.cpp": "/health", "ollama": "/api/version", "openai": "/v1/models", "sglang": "/health",
        "lmstudio": "/v1/models"}


async def test_a_server_that_is_not_there_is_not_healthy(toy_kind: Any) -> None:
    assert not await _healthy("http://127.0.0.1:9", "toy")
