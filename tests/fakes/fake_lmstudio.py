"""A FAKE LM Studio server (LM Studio is a desktop application; it does not run on these
machines), on loopback, following LM Studio's documented REST API:

- `GET /api/v0/models`: every model LM Studio has, `{"data": [{"id", "object": "model", "type":
  "llm" | "vlm" | "embeddings", "publisher", "arch", "compatibility_type", "quantization",
  "state": "loaded" | "not-loaded", "max_context_length", ("loaded_context_length" when
  loaded)}]}`, which only LM Studio answers;
- `GET /v1/models`: OpenAI's list of the same models;
- `POST /v1/completions` and `POST /v1/chat/completions`: OpenAI's SSE streams.

A model named in a request is loaded first if it is not (LM Studio's just-in-time loading).
Every request is recorded (`requests`).
"""

from __future__ import annotations

import json
from typing import Any

from .fake_chat import chat_sse
from .fake_server import FakeServer, Step
from .fake_sglang import completion_sse

__all__ = ["fake_lmstudio"]

JSON = {"content-type": "application/json"}


def fake_lmstudio(models: dict[str, str], answer: list[str] | None = None, *, loaded_context: int = 4096) -> FakeServer:
    """`models`: id -> 'loaded' or 'not-loaded' (and an embedding model beside them)."""
    states = dict(models)
    pieces = answer or ["print", "(x)"]

    def listing() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"id": "text-embedding-nomic-embed-text-v1.5", "object": "model",
                                      "type": "embeddings", "publisher": "nomic-ai", "arch": "nomic-bert",
                                      "compatibility_type": "gguf", "quantization": "Q4_K_M", "state": "not-loaded",
                                      "max_context_length": 2048}]
        for mid, state in states.items():
            entry = {"id": mid, "object": "model", "type": "llm", "publisher": "lmstudio-community", "arch": "qwen2",
                     "compatibility_type": "gguf", "quantization": "Q4_K_M", "state": state,
                     "max_context_length": 32768}
            if state == "loaded":
                entry["loaded_context_length"] = loaded_context
            out.append(entry)
        return out

    def script(path: str, body: dict[str, Any]) -> tuple[int, list[Step], dict[str, str]]:
        if path == "/api/v0/models":
            return 200, [json.dumps({"object": "list", "data": listing()}).encode()], JSON
        if path == "/v1/models":
            return 200, [json.dumps({"object": "list", "data": [{"id": m["id"], "object": "model",
                                                                 "owned_by": "organization_owner"}
                                                                for m in listing()]}).encode()], JSON
        if path in ("/v1/completions", "/v1/chat/completions"):
            if body.get("model") not in states:
                return 404, [json.dumps({"error": {"message": f"Model not found: {body.get('model')}"}}).encode()], JSON
            states[body["model"]] = "loaded"  # just in time
            return 200, completion_sse(pieces) if path == "/v1/completions" else chat_sse(pieces), {}
        return 200, [json.dumps({"error": f"Unexpected endpoint or method. ({path})"}).encode()], JSON

    return FakeServer(script)
