"""llama.cpp `llama-server` `/infill`: server-side FIM from the model's own tokens.

SSE without `[DONE]`; the final chunk has `stop: true` and `timings`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec

from ..config import BackendConfig
from ..errors import ProtocolError, ServerUnavailable
from ..streaming import SSEParser
from .base import Chunk, FimRequest, auth_headers, connect_errors, raise_for_status

__all__ = ["LlamaCppBackend"]


class _InfillChunk(msgspec.Struct):
    content: str = ""
    stop: bool = False
    timings: dict[str, float] | None = None
    tokens_evaluated: int | None = None
    error: Any = None


class _GenSettings(msgspec.Struct):
    n_ctx: int = 0


class _Props(msgspec.Struct):
    default_generation_settings: _GenSettings = msgspec.field(default_factory=_GenSettings)
    total_slots: int = 1
    model_path: str = ""
    model_alias: str = ""


_decoder = msgspec.json.Decoder(_InfillChunk)
_props_decoder = msgspec.json.Decoder(_Props)


class LlamaCppBackend:
    def __init__(self, name: str, cfg: BackendConfig, client: httpx.AsyncClient) -> None:
        self.name = name
        self.cfg = cfg
        self.client = client
        self.base = cfg.url.rstrip("/")
        self.url = self.base + "/infill"
        self.props: _Props | None = None

    async def probe(self) -> _Props:
        """`/props`: the per-slot context (`-c` split over `--parallel` slots) and the model."""
        try:
            resp = await self.client.get(self.base + "/props", headers=auth_headers(self.cfg))
        except connect_errors as exc:
            raise ServerUnavailable(f"{self.name}: cannot reach {self.cfg.url} ({exc.__class__.__name__})") from exc
        await raise_for_status(self.name, resp)
        try:
            return _props_decoder.decode(resp.content)
        except msgspec.DecodeError as exc:
            raise ProtocolError(f"{self.name}: /props answered something else ({exc})") from None

    supports_n = False
    # /infill renders the prompt server-side and ends at the model's own EOG tokens
    stop_strings: tuple[str, ...] = ()

    async def context_limit(self) -> int | None:
        if self.props is None:
            self.props = await self.probe()
        return self.props.default_generation_settings.n_ctx or None

    def body(self, req: FimRequest) -> dict[str, Any]:
        body = {
            "input_prefix": req.prefix,
            "input_suffix": req.suffix,
            "prompt": req.middle,
            "input_extra": [{"filename": c.filename, "text": c.text} for c in req.extra],
            "n_predict": req.n_predict,
            "n_indent": req.n_indent,
            "t_max_predict_ms": req.t_max_predict_ms,
            "cache_prompt": True,
            "stream": True,
            "temperature": self.cfg.temperature if req.temperature is None else req.temperature,
            "top_p": self.cfg.top_p,
            "top_k": 40,
            "samplers": self.cfg.samplers,
        }
        if req.seed is not None:
            body["seed"] = req.seed
        return body

    async def complete(self, req: FimRequest) -> AsyncIterator[Chunk]:
        parser = SSEParser()
        try:
            async with self.client.stream(
                "POST", self.url, json=self.body(req), headers=auth_headers(self.cfg)
            ) as response:
                await raise_for_status(self.name, response)
                async for data in response.aiter_raw():
                    for payload in parser.feed(data):
                        chunk = self._decode(payload)
                        yield chunk
                        if chunk.done:
                            return
                for payload in parser.close():
                    yield self._decode(payload)
        except connect_errors as exc:
            self.props = None  # a restarted server may have other slots
            raise ServerUnavailable(f"{self.name}: cannot reach {self.cfg.url} ({exc.__class__.__name__})") from exc
        except httpx.TimeoutException as exc:
            raise ServerUnavailable(f"{self.name}: no answer from {self.cfg.url} in time") from exc

    def _decode(self, payload: bytes) -> Chunk:
        try:
            msg = _decoder.decode(payload)
        except (msgspec.DecodeError, ValueError) as exc:
            raise ProtocolError(f"{self.name}: malformed stream chunk ({exc})") from None
        if msg.error is not None:
            raise ProtocolError(f"{self.name}: server error in stream: {str(msg.error)[:300]}")
        if not msg.stop:
            return Chunk(text=msg.content)
        return Chunk(text=msg.content, done=True, timings=msg.timings, prompt_tokens=msg.tokens_evaluated)
