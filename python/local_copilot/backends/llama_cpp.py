"""llama.cpp `llama-server` `/infill`: server-side FIM from the model's own tokens.

SSE without `[DONE]`; the final chunk has `stop: true` and `timings`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec

from ..config import BackendConfig
from ..errors import ProtocolError
from ..streaming import SSEParser
from .base import Chunk, FimRequest, HttpBackend

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


class LlamaCppBackend(HttpBackend):
    def __init__(self, name: str, cfg: BackendConfig, client: httpx.AsyncClient) -> None:
        super().__init__(name, cfg, client)
        self.props: _Props | None = None

    def forget(self) -> None:
        self.props = None  # a restarted server may have other slots

    async def probe(self) -> _Props:
        """`/props`: the per-slot context (`-c` split over `--parallel` slots) and the model."""
        return await self.fetch("GET", "/props", _props_decoder)

    counts_full_prompt = False
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
        async for payload in self.payloads("/infill", self.body(req), SSEParser()):
            chunk = self._decode(payload)
            yield chunk
            if chunk.done:
                return

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
