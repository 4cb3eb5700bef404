"""The chat endpoint of each backend kind, for instruction edits.

llama-server, vLLM and any OpenAI-compatible server answer `/v1/chat/completions` (SSE ending
with `data: [DONE]`); Ollama answers `/api/chat` (NDJSON ending with `done: true`). Each is an
`HttpBackend` with its own request and events, so an edit is an `Exchange` like any completion:
sent once, read as chunks, closed to stop the server. A kind with no chat endpoint known here
says so in one message.
"""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from ..backends import registry
from ..backends.base import Chunk, FimRequest, HttpBackend
from ..backends.chat_style import chat_event_decoder, ollama_event_decoder
from ..backends.exchange import Exchange, Wire
from ..backends.llama_cpp import server_props
from ..backends.ollama import KEEP_ALIVE, final_line
from ..backends.openai import final_event, listed_model
from ..config import BackendConfig
from ..errors import ConfigError
from ..transport.http_stream import StreamClient
from ..transport.streaming import NDJSONParser, SSEParser

__all__ = ["ChatBackend", "ChatChunk", "chat_backend"]


class ChatChunk(Chunk, frozen=True, kw_only=True):
    # why the model stopped, on the chunk that says so ('stop', 'length', ...)
    finish: str | None = None


class _Show(msgspec.Struct):
    model_info: dict[str, Any] = {}


_show_decoder = msgspec.json.Decoder(_Show)


class ChatBackend(HttpBackend):
    """`/v1/chat/completions` of an OpenAI-compatible server (vLLM, LM Studio, SGLang, ...)."""

    path = "/v1/chat/completions"

    def __init__(self, name: str, cfg: BackendConfig, client: httpx.AsyncClient, *, timeout_s: float = 60.0) -> None:
        super().__init__(name, cfg, client)
        # an instruct model may think for a while before its first token on a long prompt
        # (edit.timeout_ms, not the completion's timeout_ms)
        self.streams.close()
        self.streams = StreamClient(timeout=timeout_s, tls=self.tls())
        self._ready = False
        self.model = cfg.model
        self.served = cfg.model  # the model's name as the server tells it (once probed)
        self.n_ctx: int | None = None
        self.llama = False  # llama-server behind the OpenAI API: its prompt cache can be warmed

    def forget(self) -> None:
        self._ready = False

    async def ensure_ready(self) -> None:
        if self._ready:
            return
        info = await listed_model(self)
        self.model = self.served = info.id
        self.n_ctx = info.n_ctx
        self.llama = info.owned_by == "llamacpp"
        self.warms = self.llama  # a prompt evaluated alone fills the cache the edit then reuses
        self._ready = True

    async def context_limit(self) -> int | None:
        await self.ensure_ready()
        return self.n_ctx

    def body(self, messages: list[dict[str, str]], max_tokens: int, temperature: float, *,
             warm: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": not warm,
        }
        if self.model:
            body["model"] = self.model
        if not warm:
            body["stream_options"] = {"include_usage": True}
        if self.llama:
            body["cache_prompt"] = True
            if warm:
                body["n_predict"] = 0  # evaluate the prompt into a slot's cache, answer nothing
        return body

    def chat_wire(self, messages: list[dict[str, str]], max_tokens: int, temperature: float) -> Wire:
        return Wire(self.path, self.body(messages, max_tokens, temperature), SSEParser(), final_event)

    async def chat(self, messages: list[dict[str, str]], max_tokens: int, temperature: float) -> Exchange:
        """The request, prepared (the server probed first), not sent yet."""
        await self.ensure_ready()
        wire = self.chat_wire(messages, max_tokens, temperature)
        # Exchange reads of its request only how it is sent: streamed, not within a frame
        return Exchange(self, FimRequest(prefix="", middle="", suffix="", n_predict=max_tokens), wire)

    async def warm(self, messages: list[dict[str, str]]) -> None:
        """Have the server evaluate `messages` into its prompt cache (where `warms`)."""
        await self.ensure_ready()
        if not self.warms:
            return
        resp = await self.client.post(self.base + self.path, json=self.body(messages, 0, 0.0, warm=True),
                                      headers=self.headers())
        await self.raise_for_status(resp)

    def decode(self, payload: bytes) -> Chunk:
        if payload == b"[DONE]":
            return ChatChunk(text="", done=True)
        msg = self._message(chat_event_decoder, payload)
        if not msg.choices:  # the usage event
            if msg.usage is None:
                return ChatChunk(text="")
            timings = {"predicted_n": float(msg.usage.completion_tokens), **(msg.timings or {})}
            return ChatChunk(text="", prompt_tokens=msg.usage.prompt_tokens, timings=timings)
        choice = msg.choices[0]
        delta = choice.delta or choice.message  # (a streamed answer has deltas)
        return ChatChunk(text=(delta.content if delta is not None else None) or "", finish=choice.finish_reason)


class LlamaChat(ChatBackend):
    """llama-server: its OpenAI-compatible chat endpoint, its per-slot context from `/props`."""

    async def ensure_ready(self) -> None:
        if self._ready:
            return
        props = await server_props(self)
        self.n_ctx = props.default_generation_settings.n_ctx or None
        # (not sent: llama-server answers with the model it has)
        self.served = props.model_alias or props.model_path.rsplit("/", 1)[-1]
        self.llama = self.warms = True
        self._ready = True


class OllamaChat(ChatBackend):
    """Ollama `/api/chat`: NDJSON, the last line `done: true` with the counts."""

    path = "/api/chat"
    NUM_CTX = 4096  # what Ollama runs a model with unless told otherwise

    async def ensure_ready(self) -> None:
        if self._ready:
            return
        if not self.cfg.model:
            raise ConfigError(f"set backends[{self.name!r}].model to an Ollama instruct model, "
                              "e.g. 'qwen2.5-coder:7b-instruct'")
        show = await self.fetch("POST", "/api/show", _show_decoder, json={"model": self.cfg.model})
        n_ctx = next((int(v) for k, v in show.model_info.items() if k.endswith(".context_length")), None)
        self.n_ctx = min(n_ctx or self.NUM_CTX, self.NUM_CTX)
        self._ready = True

    def body(self, messages: list[dict[str, str]], max_tokens: int, temperature: float, *,
             warm: bool = False) -> dict[str, Any]:
        return {"model": self.cfg.model, "messages": messages, "stream": True, "keep_alive": KEEP_ALIVE,
                "options": {"num_predict": max_tokens, "temperature": temperature}}

    def chat_wire(self, messages: list[dict[str, str]], max_tokens: int, temperature: float) -> Wire:
        return Wire(self.path, self.body(messages, max_tokens, temperature), NDJSONParser(), final_line)

    def decode(self, payload: bytes) -> Chunk:
        msg = self._message(ollama_event_decoder, payload)
        if not msg.done:
            return ChatChunk(text=msg.message.content)
        return ChatChunk(text=msg.message.content, done=True, finish=msg.done_reason or "stop",
                         prompt_tokens=msg.prompt_eval_count or None, timings={"predicted_n": float(msg.eval_count)})


_KINDS: dict[str, type[ChatBackend]] = {"llama.cpp": LlamaChat, "openai": ChatBackend, "ollama": OllamaChat}


def chat_kinds() -> list[str]:
    """The kinds whose servers answer a chat request."""
    return sorted({*_KINDS, *(k for k in registry.names() if registry.get(k).openai_chat)})


def chat_backend(name: str, cfg: BackendConfig, client: httpx.AsyncClient, *, timeout_s: float = 60.0) -> ChatBackend:
    """The chat dialect of backend entry `name`; ConfigError for a kind with none known."""
    kind = _KINDS.get(cfg.kind)
    if kind is None and registry.get(cfg.kind).openai_chat:  # SGLang, LM Studio
        kind = ChatBackend
    if kind is None:
        raise ConfigError(f"{name}: instruction edits need a chat endpoint, and kind {cfg.kind!r} has none known "
                          f"here; set edit.backend to an entry of kind {', '.join(chat_kinds())}")
    return kind(name, cfg, client, timeout_s=timeout_s)
