"""Next-edit requests on each dialect's raw completion endpoint: the request the server gets
(the prompt as rendered, greedy, the format's stop strings, the size cap) and the edit read
back from a streamed answer. Servers: the named fakes (Ollama cannot be installed here; the
OpenAI-compatible one stands for vLLM's documented /v1/completions)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from local_copilot.backends import LlamaCppBackend, OllamaBackend, OpenAIBackend
from local_copilot.config import load_config
from local_copilot.health.next_edit import PROBE_CONTEXT, PROBE_EVENTS
from local_copilot.next_edit.formats import Zeta2
from local_copilot.next_edit.request import ask, detect_format

from ..fakes.fake_next_edit import FakeNextEditModel, answer_zeta2
from ..fakes.fake_ollama import fake_ollama
from ..fakes.fake_server import FakeServer, sse

EDIT_LINE = "    return width * h"


async def test_llama_cpp_completion_endpoint() -> None:
    srv = FakeNextEditModel("zeta2")
    try:
        cfg = load_config({"backends": {"llama.cpp": {"url": srv.url}}}).active
        async with httpx.AsyncClient() as client:
            b = LlamaCppBackend("llama.cpp", cfg, client)
            fmt = await detect_format(b)  # from /props' model_alias
            out = await ask(b, fmt, PROBE_CONTEXT, PROBE_EVENTS, 64)
    finally:
        srv.close()
    assert fmt.name == "zeta2"
    assert out.edit is not None and (out.edit.row, out.edit.col, out.edit.text) == (1, 12, "idth")
    path, body = srv.requests[-1]
    assert path == "/completion"
    assert body["prompt"] == out.prompt.text and body["stop"] == [">>>>>>> UPDATED"]
    assert body["n_predict"] == 64 and body["temperature"] == 0.0 and body["cache_prompt"] is True
    assert body["stream"] is True and "t_max_predict_ms" not in body  # a size cap, never a time cap


async def test_openai_completions_endpoint_as_vllm() -> None:
    def script(path: str, body: dict[str, Any]) -> tuple[int, list[Any]]:
        if path == "/v1/models":
            return 200, [json.dumps({"data": [{"id": "zed-industries/zeta-2", "owned_by": "vllm"}]}).encode()]
        text = answer_zeta2(body["prompt"])
        steps = [sse({"choices": [{"index": 0, "text": text[i:i + 5], "finish_reason": None}]})
                 for i in range(0, len(text), 5)]
        steps.append(sse({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 9}}))
        return 200, [*steps, b"data: [DONE]\n\n"]

    srv = FakeServer(script)
    try:
        cfg = load_config({"backend": "vllm", "backends": {"vllm": {"url": srv.url}}}).active
        async with httpx.AsyncClient() as client:
            b = OpenAIBackend("vllm", cfg, client)
            fmt = await detect_format(b)  # from the model id
            out = await ask(b, fmt, PROBE_CONTEXT, PROBE_EVENTS, 64)
    finally:
        srv.close()
    assert fmt.name == "zeta2" and out.edit is not None and out.edit.text == "idth"
    path, body = srv.requests[-1]
    assert path == "/v1/completions"
    assert body["model"] == "zed-industries/zeta-2" and body["prompt"] == out.prompt.text
    assert body["max_tokens"] == 64 and body["temperature"] == 0.0 and body["stop"] == [">>>>>>> UPDATED"]
    # vLLM drops special tokens from the text unless told not to
    assert body["skip_special_tokens"] is False and "suffix" not in body


async def test_ollama_generate_raw() -> None:
    prompt = Zeta2().build(PROBE_CONTEXT, PROBE_EVENTS).text
    answer = answer_zeta2(prompt)
    srv = fake_ollama({"zeta2:8b": {"family": "seed_oss", "template": "{{ .Prompt }}"}},
                      [answer[i:i + 6] for i in range(0, len(answer), 6)])
    try:
        cfg = load_config({"backend": "ollama", "backends": {"ollama": {"url": srv.url, "model": "zeta2:8b"}}}).active
        async with httpx.AsyncClient() as client:
            b = OllamaBackend("ollama", cfg, client)
            out = await ask(b, await detect_format(b), PROBE_CONTEXT, PROBE_EVENTS, 64)
    finally:
        srv.close()
    assert out.edit is not None and out.edit.text == "idth"
    path, body = srv.requests[-1]
    assert path == "/api/generate"
    assert body["raw"] is True and body["prompt"] == prompt and body["model"] == "zeta2:8b"
    assert body["options"] == {"num_predict": 64, "temperature": 0.0, "stop": [">>>>>>> UPDATED"]}


async def test_an_answer_cut_at_the_size_cap_is_no_edit() -> None:
    srv = FakeNextEditModel("sweep")
    try:
        cfg = load_config({"backends": {"llama.cpp": {"url": srv.url}}}).active
        async with httpx.AsyncClient() as client:
            b = LlamaCppBackend("llama.cpp", cfg, client)
            # the fake reports as many tokens as its answer has pieces: more than 3
            out = await ask(b, await detect_format(b), PROBE_CONTEXT, PROBE_EVENTS, 3)
    finally:
        srv.close()
    assert out.edit is None and out.why == "the answer reached the size cap"
