"""Wire formats of the three dialects against FAKE servers (request bodies, stream parsing,
errors, auth). The same backends run against the real llama-server and vLLM in
tests/integration."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import msgspec
import pytest

from local_copilot.backends import (
    FimRequest,
    OllamaBackend,
    OpenAIBackend,
    make_backend,
)
from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.errors import ConfigError, ProtocolError, ServerError
from local_copilot.snapshot import Snapshot

from ..fakes.editor import RecordingEditor
from ..fakes.fake_ollama import QWEN_TEMPLATE, fake_ollama
from ..fakes.fake_server import FakeServer, sse
from .test_engine import wait_until

REQ = FimRequest(prefix="def f():\n", middle="    return ", suffix="\nprint(f())", n_predict=16, path="a.py")


def openai_script(models: list[dict[str, Any]], pieces: list[str]):
    def script(path: str, body: dict[str, Any]):
        if path == "/v1/models":
            return 200, [json.dumps({"object": "list", "data": models}).encode()]
        if path == "/tokenize":
            return 200, [json.dumps({"tokens": [1000 + len(body["prompt"])]}).encode()]
        steps = [sse({"choices": [{"index": 0, "text": p, "finish_reason": None}]}) for p in pieces]
        steps.append(sse({"choices": [], "usage": {"prompt_tokens": 19, "completion_tokens": len(pieces)}}))
        steps.append(b"data: [DONE]\n\n")
        return 200, steps

    return script


@pytest.fixture()
def servers():
    made: list[FakeServer] = []
    yield made
    for s in made:
        s.close()


async def collect(backend: Any) -> list[Any]:
    return [c async for c in backend.complete(REQ)]


async def test_openai_renders_the_fim_prompt_client_side_for_vllm(servers: list[FakeServer]) -> None:
    srv = FakeServer(openai_script([{"id": "Qwen/Qwen2.5-Coder-1.5B", "owned_by": "vllm", "max_model_len": 8192}], ["ab", "c"]))
    servers.append(srv)
    cfg = load_config({"backend": "vllm", "backends": {"vllm": {"url": srv.url}}}).active
    async with httpx.AsyncClient() as client:
        b = OpenAIBackend("vllm", cfg, client)
        chunks = await collect(b)
        assert await b.context_limit() == 8192
    assert "".join(c.text for c in chunks) == "abc"
    assert chunks[-1].done and any(c.prompt_tokens == 19 for c in chunks)
    path, body = srv.requests[-1]
    assert path == "/v1/completions"
    # the cursor line's text follows the middle marker: typing only appends to the prompt
    assert body["prompt"] == "<|fim_prefix|>def f():\n<|fim_suffix|>\nprint(f())<|fim_middle|>    return "
    assert "suffix" not in body  # vLLM rejects it for nearly every model
    assert body["model"] == "Qwen/Qwen2.5-Coder-1.5B" and body["max_tokens"] == 16
    assert body["temperature"] == 0.1 and body["top_p"] == 0.9 and body["stream"] is True
    assert len(body["stop"]) <= 4  # the OpenAI schema's limit; vLLM enforces it
    # special tokens kept in the text so stop strings match; ids from the server's tokenizer
    assert body["skip_special_tokens"] is False
    assert body["stop_token_ids"] and all(i >= 1000 for i in body["stop_token_ids"])


async def test_openai_unknown_model_family_gives_one_clear_message(servers: list[FakeServer]) -> None:
    srv = FakeServer(openai_script([{"id": "my-private-model", "owned_by": "vllm"}], ["x"]))
    servers.append(srv)
    cfg = load_config({"backend": "vllm", "backends": {"vllm": {"url": srv.url}}}).active
    async with httpx.AsyncClient() as client:
        with pytest.raises(ConfigError) as err:
            await collect(OpenAIBackend("vllm", cfg, client))
    msg = str(err.value)
    assert "my-private-model" in msg and "fim_template" in msg and "qwen" in msg and "starcoder" in msg
    assert all(p != "/v1/completions" for p, _ in srv.requests)  # never a garbage prompt


async def test_openai_configured_template_and_model_override(servers: list[FakeServer]) -> None:
    srv = FakeServer(openai_script([{"id": "a", "owned_by": "lmstudio"}, {"id": "b", "owned_by": "lmstudio"}], ["x"]))
    servers.append(srv)
    cfg = load_config({"backend": "openai", "backends": {"openai": {"url": srv.url, "model": "b", "fim_template": "deepseek"}}}).active
    async with httpx.AsyncClient() as client:
        await collect(OpenAIBackend("openai", cfg, client))
    body = srv.requests[-1][1]
    assert body["model"] == "b"
    assert body["prompt"].startswith("<｜fim▁begin｜>def f():")
    assert "stop_token_ids" not in body and "skip_special_tokens" not in body  # vLLM-only fields


async def test_api_key_comes_from_the_environment_and_is_never_logged(servers: list[FakeServer], monkeypatch: Any, caplog: Any) -> None:
    srv = FakeServer(openai_script([{"id": "qwen2.5-coder-7b", "owned_by": "vllm"}], ["x"]))
    servers.append(srv)
    monkeypatch.setenv("LAB_KEY", "sk-secret-123")
    raw = {"backend": "vllm", "backends": {"vllm": {"url": srv.url, "api_key_env": "LAB_KEY"}}, "log_level": "debug"}
    cfg = load_config(raw).active
    # the plugin's logger does not propagate to the root logger once setup_logging() ran (an
    # earlier test may have): caplog's handler goes on it directly, or nothing is checked
    plugin_log = logging.getLogger("local_copilot")
    plugin_log.addHandler(caplog.handler)
    monkeypatch.setattr(plugin_log, "level", logging.DEBUG)
    try:
        async with httpx.AsyncClient() as client:
            await collect(OpenAIBackend("vllm", cfg, client))
        assert all(body["_headers"].get("authorization") == "Bearer sk-secret-123" for _, body in srv.requests)
        # a failing request through the engine logs a warning: the log is written, without the key
        srv.script = lambda path, body: (401, [b'{"error":{"message":"bad key boom401"}}'])
        editor = RecordingEditor()
        engine = Core(editor)
        engine.configure(load_config(raw))
        engine.ghost.submit(Snapshot(buf=1, tick=1, row=0, col=4, first=0, lines=["x = "], seq=1))
        await wait_until(lambda: "down" in editor.states)
        await engine.close()
    finally:
        plugin_log.removeHandler(caplog.handler)
    assert "boom401" in caplog.text, caplog.text  # the capture saw the plugin's log
    assert "sk-secret-123" not in caplog.text


async def test_openai_error_event_mid_stream_ends_the_request(servers: list[FakeServer]) -> None:
    def script(path: str, body: dict[str, Any]):
        if path == "/v1/models":
            return 200, [b'{"data":[{"id":"qwen2.5-coder","owned_by":"vllm"}]}']
        return 200, [sse({"choices": [{"text": "a"}]}), sse({"error": {"message": "engine died", "code": 500}}), b"data: [DONE]\n\n"]

    srv = FakeServer(script)
    servers.append(srv)
    cfg = load_config({"backend": "vllm", "backends": {"vllm": {"url": srv.url}}}).active
    async with httpx.AsyncClient() as client:
        with pytest.raises(ProtocolError, match="engine died"):
            await collect(OpenAIBackend("vllm", cfg, client))


async def test_ollama_raw_prompt_with_options_and_keep_alive(servers: list[FakeServer]) -> None:
    srv = fake_ollama({"qwen2.5-coder:1.5b-base": {"family": "qwen2", "template": QWEN_TEMPLATE, "capabilities": ["completion", "insert"]}}, ["pri", "nt"])
    servers.append(srv)
    cfg = load_config({"backend": "ollama", "backends": {"ollama": {"url": srv.url, "model": "qwen2.5-coder:1.5b-base"}}}).active
    async with httpx.AsyncClient() as client:
        b = OllamaBackend("ollama", cfg, client)
        chunks = await collect(b)
        assert await b.context_limit() == 4096  # Ollama's default num_ctx, not the model's 32768
    assert "".join(c.text for c in chunks) == "print"
    assert chunks[-1].done and chunks[-1].prompt_tokens == 26
    path, body = srv.requests[-1]
    assert path == "/api/generate"
    assert body["raw"] is True and "suffix" not in body
    # the cursor line's text follows the middle marker: typing only appends to the prompt
    assert body["prompt"] == "<|fim_prefix|>def f():\n<|fim_suffix|>\nprint(f())<|fim_middle|>    return "
    assert body["options"]["num_predict"] == 16
    assert body["options"]["temperature"] == 0.1 and body["options"]["top_p"] == 0.9
    assert body["keep_alive"] and body["stream"] is True


async def test_ollama_unknown_family_with_insert_uses_suffix(servers: list[FakeServer]) -> None:
    srv = fake_ollama({"mystery:7b": {"family": "mystery", "template": "{{ .Prompt }}{{ .Suffix }}", "capabilities": ["insert"]}}, ["x"])
    servers.append(srv)
    cfg = load_config({"backend": "ollama", "backends": {"ollama": {"url": srv.url, "model": "mystery:7b"}}}).active
    async with httpx.AsyncClient() as client:
        await collect(OllamaBackend("ollama", cfg, client))
    body = srv.requests[-1][1]
    assert "raw" not in body
    assert body["prompt"] == "def f():\n    return " and body["suffix"] == "\nprint(f())"


async def test_ollama_missing_model_says_how_to_pull_it(servers: list[FakeServer]) -> None:
    srv = fake_ollama({}, ["x"])
    servers.append(srv)
    cfg = load_config({"backend": "ollama", "backends": {"ollama": {"url": srv.url, "model": "qwen2.5-coder:1.5b"}}}).active
    async with httpx.AsyncClient() as client:
        with pytest.raises(ProtocolError, match="ollama pull qwen2.5-coder:1.5b"):
            await collect(OllamaBackend("ollama", cfg, client))


async def test_llama_cpp_http_500_names_the_server_message(servers: list[FakeServer]) -> None:
    srv = FakeServer(lambda p, b: (500, [b'{"error":{"code":500,"message":"boom","type":"server_error"}}']))
    servers.append(srv)
    cfg = load_config({"backends": {"llama.cpp": {"url": srv.url}}}).active
    async with httpx.AsyncClient() as client:
        with pytest.raises(ServerError, match="HTTP 500: boom"):
            await collect(make_backend("llama.cpp", cfg, client))


async def test_https_urls_are_used_as_given() -> None:
    cfg = load_config({"backend": "vllm", "backends": {"vllm": {"url": "https://gpu.example:8443/"}}}).active
    async with httpx.AsyncClient() as client:
        b = OpenAIBackend("vllm", cfg, client)
        assert b.base == "https://gpu.example:8443"


def _llama(srv_streams: list[str]):
    from ..fakes.fake_server import infill_stream, llama_props

    return lambda path, body: (200, llama_props()) if path == "/props" else (200, infill_stream(srv_streams))


async def test_llama_cpp_renders_the_prompt_when_the_vocab_has_a_known_fim_form(servers: list[FakeServer]) -> None:
    from ..fakes.fake_server import QWEN_FIM

    srv = FakeServer(_llama(["pri", "nt"]))
    srv.fim_tokens = QWEN_FIM
    servers.append(srv)
    cfg = load_config({"backends": {"llama.cpp": {"url": srv.url}}}).active
    async with httpx.AsyncClient() as client:
        b = make_backend("llama.cpp", cfg, client)
        chunks = await collect(b)
        assert b.counts_full_prompt and b.continues and "<|fim_middle|>" in b.stop_strings
    assert "".join(c.text for c in chunks) == "print"
    path, body = srv.requests[-1]
    assert path == "/completion" and "input_prefix" not in body
    assert body["prompt"] == "<|fim_prefix|>def f():\n<|fim_suffix|>\nprint(f())<|fim_middle|>    return "
    assert body["n_predict"] == 16 and body["cache_prompt"] is True and body["stream"] is True
    # the answer carries only what is read (no echo of the prompt)
    assert body["response_fields"] == ["content", "stop", "timings", "tokens_evaluated", "id_slot", "error"]
    # the vocabulary is read once per server, not per request
    assert [p for p, _ in srv.requests].count("/tokenize") == 1


async def test_llama_cpp_names_the_slot_a_request_asks_for(servers: list[FakeServer]) -> None:
    """A request for a buffer's slot (backends/slots.py) says `id_slot`; others leave the choice
    to the server (no `id_slot` at all, as before slots were named)."""
    from ..fakes.fake_server import QWEN_FIM

    srv = FakeServer(_llama(["x"]))
    srv.fim_tokens = QWEN_FIM
    servers.append(srv)
    cfg = load_config({"backends": {"llama.cpp": {"url": srv.url}}}).active
    async with httpx.AsyncClient() as client:
        b = make_backend("llama.cpp", cfg, client)
        await collect(b)
        [c async for c in b.complete(msgspec.structs.replace(REQ, slot=2))]
    bodies = [body for path, body in srv.requests if path == "/completion"]
    assert "id_slot" not in bodies[0] and bodies[1]["id_slot"] == 2


async def test_llama_cpp_endpoint_infill_keeps_the_servers_prompt(servers: list[FakeServer]) -> None:
    from ..fakes.fake_server import QWEN_FIM

    srv = FakeServer(_llama(["x"]))
    srv.fim_tokens = QWEN_FIM
    servers.append(srv)
    cfg = load_config({"backends": {"llama.cpp": {"url": srv.url, "endpoint": "infill"}}}).active
    async with httpx.AsyncClient() as client:
        b = make_backend("llama.cpp", cfg, client)
        await collect(b)
        assert not b.continues
    assert [p for p, _ in srv.requests] == ["/props", "/infill"]


async def test_llama_cpp_endpoint_completion_without_a_known_form_says_to_set_the_template(servers: list[FakeServer]) -> None:
    srv = FakeServer(_llama(["x"]))  # the fake's vocabulary has no FIM tokens
    servers.append(srv)
    cfg = load_config({"backends": {"llama.cpp": {"url": srv.url, "endpoint": "completion"}}}).active
    async with httpx.AsyncClient() as client:
        with pytest.raises(ConfigError, match="set fim_template"):
            await collect(make_backend("llama.cpp", cfg, client))


async def test_llama_cpp_uses_infill_without_a_known_fim_form(servers: list[FakeServer]) -> None:
    srv = FakeServer(_llama(["pri", "nt"]))  # the fake's vocabulary has no FIM tokens
    servers.append(srv)
    cfg = load_config({"backends": {"llama.cpp": {"url": srv.url}}}).active
    async with httpx.AsyncClient() as client:
        b = make_backend("llama.cpp", cfg, client)
        chunks = await collect(b)
        assert not b.counts_full_prompt and not b.continues and b.stop_strings == ()
    assert "".join(c.text for c in chunks) == "print"
    path, body = srv.requests[-1]
    assert path == "/infill"
    assert (body["input_prefix"], body["prompt"], body["input_suffix"]) == ("def f():\n", "    return ", "\nprint(f())")


async def test_llama_cpp_with_a_configured_template_renders_the_prompt_itself(servers: list[FakeServer]) -> None:
    srv = FakeServer(_llama(["x"]))
    servers.append(srv)
    cfg = load_config({"backends": {"llama.cpp": {"url": srv.url, "fim_template": "starcoder"}}}).active
    async with httpx.AsyncClient() as client:
        await collect(make_backend("llama.cpp", cfg, client))
    path, body = srv.requests[-1]
    assert path == "/completion"
    # the cursor line's text follows the middle marker: typing only appends to the prompt
    assert body["prompt"] == "<fim_prefix>def f():\n<fim_suffix>\nprint(f())<fim_middle>    return "


async def test_llama_cpp_unstreamed_answer_is_one_final_chunk(servers: list[FakeServer]) -> None:
    from local_copilot.backends import FimRequest

    srv = FakeServer(_llama(["pri", "nt"]))
    servers.append(srv)
    cfg = load_config({"backends": {"llama.cpp": {"url": srv.url}}}).active
    async with httpx.AsyncClient() as client:
        b = make_backend("llama.cpp", cfg, client)
        req = FimRequest(prefix="def f():\n", middle="    return ", suffix="\n", n_predict=16, stream=False)
        chunks = [c async for c in b.complete(req)]
    assert srv.requests[-1][1]["stream"] is False
    assert [(c.text, c.done) for c in chunks] == [("print", True)]
    assert chunks[0].timings == {"predicted_n": 2}


async def test_an_oversized_unstreamed_answer_is_refused(servers: list[FakeServer]) -> None:
    from local_copilot.backends import FimRequest
    from local_copilot.errors import ProtocolError

    srv = FakeServer(_llama(["x" * (2 << 20)]))  # 2 MB of "completion"
    servers.append(srv)
    cfg = load_config({"backends": {"llama.cpp": {"url": srv.url}}}).active
    async with httpx.AsyncClient() as client:
        b = make_backend("llama.cpp", cfg, client)
        req = FimRequest(prefix="", middle="", suffix="", n_predict=16, stream=False)
        with pytest.raises(ProtocolError, match="answer longer than 1024 KB"):
            [c async for c in b.complete(req)]


def test_llama_cpp_merges_the_events_of_one_read_and_keeps_their_texts() -> None:
    cfg = load_config({"backends": {"llama.cpp": {"url": "http://127.0.0.1:9"}}}).active
    b = make_backend("llama.cpp", cfg, httpx.AsyncClient())
    ev = [json.dumps({"content": t, "stop": False}).encode() for t in ("pri", "", "nt", "(")]
    last = json.dumps({"content": ")", "stop": True, "timings": {"predicted_n": 5}}).encode()
    chunks = list(b.chunks(ev + [last]))
    assert [(c.text, c.parts, c.more, c.done) for c in chunks] == [
        ("print(", ("pri", "nt", "("), True, False), (")", (), False, True)]
    assert chunks[-1].timings == {"predicted_n": 5}
    # a bad event in the read: the events before it come as they are, then its error
    bad = list(ev[:2]) + [b'{"content": "nt", "stop": fal'] + [last]
    got: list[str] = []
    with pytest.raises(ProtocolError, match="malformed stream chunk"):
        for chunk in b.chunks(bad):
            got.append(chunk.text)
    assert got == ["pri", ""]
