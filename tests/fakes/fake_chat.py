"""A FAKE chat server on loopback, for instruction edits: it answers as chosen per request
(a slow, cut or prose answer on demand) and records the prompts it got. It follows the
published formats: OpenAI's chat completions (`POST /v1/chat/completions`, SSE chunks with
`choices[].delta.content` and `finish_reason`, then `data: [DONE]`; `stream: false` gets one
`chat.completion` document), as llama-server and vLLM serve them, and Ollama's `/api/chat`
(NDJSON lines with `message.content`, the last one `done: true` with `done_reason`).

The real llama-server and vLLM are tested in tests/integration/test_edit_servers.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .fake_server import CLOSE, FakeServer, Step, llama_props, sse

__all__ = ["CLOSE", "Answer", "FakeChat", "chat_sse", "ollama_ndjson", "user_prompt"]


def chat_sse(pieces: list[str], *, finish: str | None = "stop", delay: float = 0.0, done: bool = True) -> list[Step]:
    """An OpenAI chat stream of `pieces`; `finish` None and `done` False: it just ends."""
    steps: list[Step] = [sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": None},
                                            "finish_reason": None}], "object": "chat.completion.chunk"})]
    for piece in pieces:
        if delay:
            steps.append(delay)
        steps.append(sse({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                          "object": "chat.completion.chunk"}))
    if finish is not None:
        steps.append(sse({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                          "object": "chat.completion.chunk"}))
        steps.append(sse({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": len(pieces)},
                          "object": "chat.completion.chunk"}))
    if done:
        steps.append(b"data: [DONE]\n\n")
    return steps


def ollama_ndjson(pieces: list[str], *, done_reason: str = "stop", delay: float = 0.0) -> list[Step]:
    steps: list[Step] = []
    for piece in pieces:
        if delay:
            steps.append(delay)
        steps.append(json.dumps({"model": "m", "message": {"role": "assistant", "content": piece},
                                 "done": False}).encode() + b"\n")
    steps.append(json.dumps({"model": "m", "message": {"role": "assistant", "content": ""}, "done": True,
                             "done_reason": done_reason, "prompt_eval_count": 100,
                             "eval_count": len(pieces)}).encode() + b"\n")
    return steps


class FakeChat(FakeServer):
    """Answers each chat request with the next of `answers` (steps, or a function of the
    request's body giving steps); the last one repeats. `kind` shapes the probes: 'llama.cpp'
    (/props with `n_ctx`), 'openai' (/v1/models), 'ollama' (/api/show)."""

    def __init__(self, answers: list[Any], *, kind: str = "llama.cpp", n_ctx: int = 4096) -> None:
        self.answers = list(answers)
        self.kind = kind
        self.n_ctx = n_ctx
        self.chats: list[dict[str, Any]] = []  # the chat requests that asked for an answer
        self.warms: list[dict[str, Any]] = []  # the ones that only evaluated the prompt
        super().__init__(self._script)

    def _next(self, body: dict[str, Any]) -> list[Step]:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return list(answer(body) if isinstance(answer, Callable) else answer)  # type: ignore[arg-type]

    def _script(self, path: str, body: dict[str, Any]) -> tuple[int, list[Step]]:
        if path == "/props":
            return 200, llama_props(self.n_ctx)
        if path == "/v1/models":
            owned = "llamacpp" if self.kind == "llama.cpp" else "vllm"
            return 200, [json.dumps({"object": "list", "data": [
                {"id": "fake-instruct", "object": "model", "owned_by": owned, "max_model_len": self.n_ctx}]}).encode()]
        if path == "/api/show":
            return 200, [json.dumps({"template": "{{ .Prompt }}", "details": {"family": "qwen2"},
                                     "capabilities": ["completion"],
                                     "model_info": {"qwen2.context_length": self.n_ctx}}).encode()]
        if path == "/v1/chat/completions":
            if body.get("stream") is False:  # a warm-up: the prompt evaluated, one document back
                self.warms.append(body)
                return 200, [json.dumps({"object": "chat.completion", "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "length"}]}).encode()]
            self.chats.append(body)
            return 200, self._next(body)
        if path == "/api/chat":
            self.chats.append(body)
            return 200, self._next(body)
        return 404, [b'{"error": "not found"}']


def user_prompt(body: dict[str, Any]) -> str:
    """The last user message of a chat request."""
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


Answer = list[Step] | Callable[[dict[str, Any]], list[Step]]
