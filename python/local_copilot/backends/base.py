"""The backend interface: a FIM request in, an async stream of text chunks out."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any, Protocol, TypeVar

import httpx
import msgspec

from ..config import BackendConfig
from ..errors import ProtocolError, ServerError, ServerUnavailable
from ..fim_templates import ExtraChunk

__all__ = ["Backend", "Chunk", "FimRequest", "HttpBackend", "raise_for_status", "auth_headers", "connect_errors"]


class FimRequest(msgspec.Struct, frozen=True, kw_only=True):
    prefix: str  # lines above the cursor line
    middle: str  # the cursor line up to the cursor
    suffix: str  # the rest of the cursor line and the lines below
    n_predict: int
    n_indent: int = 0
    t_max_predict_ms: int = 0
    path: str = ""
    # chunks of other files, oldest first (stable prompt start), for repo-level FIM
    extra: tuple[ExtraChunk, ...] = ()
    # alternatives: sample more freely, and ask for n candidates where the server can (OpenAI `n`)
    temperature: float | None = None
    n: int = 1
    seed: int | None = None  # distinct seeds make sampled alternatives differ, reproducibly


class Chunk(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    done: bool = False
    # server counters on the last chunk, when it reports them (tokens, ms)
    timings: dict[str, float] | None = None
    # prompt tokens the server counted (to calibrate the token estimator)
    prompt_tokens: int | None = None
    # which candidate this text belongs to when n > 1
    index: int = 0


class Backend(Protocol):
    name: str
    # strings that end a completion (the FIM template's special tokens), cut client-side too
    stop_strings: tuple[str, ...]
    # whether one request can return several candidates (FimRequest.n)
    supports_n: bool
    # whether the prompt token count the server reports is of the whole prompt we sent;
    # servers that cut the prompt first (llama.cpp /infill, Ollama's num_ctx) under-count it,
    # and calibrating on that would make every later prompt too big
    counts_full_prompt: bool

    async def context_limit(self) -> int | None:
        """Tokens one request may use (per-slot context), or None when the server won't say."""
        ...

    def complete(self, req: FimRequest) -> AsyncIterator[Chunk]:
        """Stream the completion; closing the iterator closes the HTTP stream (cancel)."""
        ...


def auth_headers(cfg: BackendConfig) -> dict[str, str]:
    if cfg.api_key_env:
        key = os.environ.get(cfg.api_key_env, "")
        if key:
            return {"Authorization": f"Bearer {key}"}
    return {}


# what "the server is not there" looks like in httpx
connect_errors = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError)


def _error_object(body: bytes) -> Any:
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    return doc.get("error") if isinstance(doc, dict) else None


def error_message(body: bytes) -> str:
    """The server's own message from {"error": {"message": ...}} or {"error": "..."}."""
    err = _error_object(body)
    if isinstance(err, str):
        return err
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return str(err["message"])
    return body[:200].decode("utf-8", "replace").strip()


async def raise_for_status(name: str, response: httpx.Response) -> None:
    if response.status_code == 200:
        return
    body = await response.aread()
    message = error_message(body)
    if response.status_code == 503:
        raise ServerUnavailable(f"{name}: server not ready (503: {message or 'loading'})")
    err = _error_object(body)
    counted = err.get("n_prompt_tokens") if isinstance(err, dict) else None
    raise ServerError(f"{name}: HTTP {response.status_code}: {message}", status=response.status_code,
                      prompt_tokens=counted if isinstance(counted, int) and counted > 0 else None)


T = TypeVar("T")


class _Parser(Protocol):
    def feed(self, data: bytes) -> list[bytes]: ...

    def close(self) -> list[bytes]: ...


class HttpBackend:
    """What every dialect shares: auth, error translation, probes and the streamed payloads."""

    def __init__(self, name: str, cfg: BackendConfig, client: httpx.AsyncClient) -> None:
        self.name = name
        self.cfg = cfg
        self.client = client
        self.base = cfg.url.rstrip("/")

    def forget(self) -> None:
        """The server went away: what was probed may differ when it comes back."""

    def _unreachable(self, exc: Exception) -> ServerUnavailable:
        self.forget()
        if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
            return ServerUnavailable(f"{self.name}: no answer from {self.cfg.url} in time")
        return ServerUnavailable(f"{self.name}: cannot reach {self.cfg.url} ({exc.__class__.__name__})")

    async def fetch(self, method: str, path: str, decoder: msgspec.json.Decoder[T], *, json: Any = None) -> T:
        """One small JSON request (a probe), decoded strictly."""
        try:
            resp = await self.client.request(method, self.base + path, json=json, headers=auth_headers(self.cfg))
        except (*connect_errors, httpx.TimeoutException) as exc:
            raise self._unreachable(exc) from exc
        await raise_for_status(self.name, resp)
        try:
            return decoder.decode(resp.content)
        except msgspec.DecodeError as exc:
            raise ProtocolError(f"{self.name}: {path} answered something else ({exc})") from None

    async def payloads(self, path: str, body: dict[str, Any], parser: _Parser) -> AsyncIterator[bytes]:
        """The stream's payloads (SSE data or NDJSON lines); closing this closes the stream."""
        try:
            async with self.client.stream("POST", self.base + path, json=body,
                                          headers=auth_headers(self.cfg)) as response:
                await raise_for_status(self.name, response)
                async for data in response.aiter_raw():
                    for payload in parser.feed(data):
                        yield payload
                for payload in parser.close():
                    yield payload
        except (*connect_errors, httpx.TimeoutException) as exc:
            raise self._unreachable(exc) from exc
        except ValueError as exc:  # a line too long for the parser
            raise ProtocolError(f"{self.name}: {exc}") from None
