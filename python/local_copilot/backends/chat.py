"""A server's chat endpoint, for instruction edits: OpenAI's `/v1/chat/completions`.

vLLM, SGLang, LM Studio and any OpenAI-compatible server answer it with SSE events ending with
`data: [DONE]`. A kind whose server answers otherwise (Ollama's `/api/chat`) or tells its
context elsewhere (llama-server's `/props`) subclasses `ChatBackend` in its own module; the
kind's registry record names its chat dialect (`Kind.chat`). Each is an `HttpBackend` with its
own request and events, so an edit is an `Exchange` like any completion: sent once, read as
chunks, closed to stop the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..transport.exchange import Exchange, Wire
from ..transport.http_stream import StreamClient
from ..transport.streaming import SSEParser
from .base import Chunk, HttpBackend
from .chat_style import chat_event_decoder
from .probe import listed_model

if TYPE_CHECKING:
    import httpx

    from ..backend_config import BackendConfig

__all__ = ["ChatBackend", "ChatChunk", "final_event"]


def final_event(payload: bytes) -> bool:
    # OpenAI streams end with a [DONE] event
    return payload == b"[DONE]"


def _usage_timings(msg: Any) -> dict[str, float]:
    """A chat stream's usage event as counters (llama-server adds its own `timings`)."""
    return {"predicted_n": float(msg.usage.completion_tokens), **(msg.timings or {})}


class ChatChunk(Chunk, frozen=True, kw_only=True):
    # why the model stopped, on the chunk that says so ('stop', 'length', ...)
    finish: str | None = None


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
        super().forget()
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
        return Exchange(self.link(), wire)  # streamed, not within a frame, in the server's choice of slot

    async def warm(self, messages: list[dict[str, str]]) -> None:
        """Have the server evaluate `messages` into its prompt cache (where `warms`)."""
        await self.ensure_ready()
        if not self.warms:
            return
        resp = await self.client.post(self.base + self.path, json=self.body(messages, 0, 0.0, warm=True),
                                      headers=self.headers())
        await self.raise_for_status(resp)

    def decode(self, payload: bytes) -> Chunk:
        msg = self._openai_event(chat_event_decoder, payload, ChatChunk, _usage_timings)
        if isinstance(msg, Chunk):  # the end, or the usage event
            return msg
        choice = msg.choices[0]
        delta = choice.delta or choice.message  # (a streamed answer has deltas)
        return ChatChunk(text=(delta.content if delta is not None else None) or "", finish=choice.finish_reason)
