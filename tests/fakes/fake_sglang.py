"""A FAKE SGLang server (SGLang needs a GPU and its own install; it does not run on these
machines), on loopback, following SGLang's documented HTTP API:

- `GET /health` answers 200 once the server takes requests; `GET /health_generate` answers 200
  after a one-token generation ran;
- `GET /get_model_info`: `{"model_path", "tokenizer_path", "is_generation": true, ...}`, which
  only SGLang answers;
- `GET /v1/models`: OpenAI's list, `owned_by: "sglang"`, with `max_model_len`;
- `POST /v1/completions` and `POST /v1/chat/completions`: OpenAI's SSE streams (the usage chunk
  with an empty `choices` when `stream_options.include_usage`, then `data: [DONE]`).

Every request is recorded (`requests`: path and body, the headers under `_headers`).
"""

from __future__ import annotations

import json
from typing import Any

from .fake_chat import chat_sse
from .fake_server import FakeServer, Step, sse

__all__ = ["fake_sglang", "completion_sse"]

JSON = {"content-type": "application/json"}


def completion_sse(pieces: list[str]) -> list[Step]:
    """An OpenAI /v1/completions stream of `pieces`, its usage chunk, [DONE]."""
    steps: list[Step] = [sse({"object": "text_completion", "choices": [{"index": 0, "text": p, "finish_reason": None}]})
                         for p in pieces]
    steps.append(sse({"object": "text_completion", "choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}))
    steps.append(sse({"object": "text_completion", "choices": [],
                      "usage": {"prompt_tokens": 20, "completion_tokens": len(pieces)}}))
    steps.append(b"data: [DONE]\n\n")
    return steps


def fake_sglang(model: str = "Qwen/Qwen2.5-Coder-1.5B", answer: list[str] | None = None, *,
                context: int = 32768, key: str = "") -> FakeServer:
    """`key`: the server was started with --api-key: every path but the health checks wants it."""
    pieces = answer or ["print", "(x)"]

    def script(path: str, body: dict[str, Any]) -> tuple[int, list[Step], dict[str, str]]:
        if path in ("/health", "/health_generate"):
            return 200, [], JSON
        if key and body["_headers"].get("authorization") != f"Bearer {key}":
            return 401, [json.dumps({"error": {"message": "Unauthorized", "type": "invalid_request_error"}}).encode()], JSON
        if path == "/get_model_info":
            return 200, [json.dumps({"model_path": model, "tokenizer_path": model, "is_generation": True,
                                     "preferred_sampling_params": None, "weight_version": "default"}).encode()], JSON
        if path == "/v1/models":
            return 200, [json.dumps({"object": "list", "data": [{"id": model, "object": "model", "created": 1,
                                                                 "owned_by": "sglang", "root": model,
                                                                 "max_model_len": context}]}).encode()], JSON
        if path == "/v1/completions":
            return 200, completion_sse(pieces), {}
        if path == "/v1/chat/completions":
            return 200, chat_sse(pieces), {}
        return 404, [json.dumps({"detail": "Not Found"}).encode()], JSON

    return FakeServer(script)
