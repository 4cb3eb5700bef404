"""The backend interface: a FIM request in, an async stream of text chunks out."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import aclosing
from typing import Any, Protocol, TypeVar

import httpx
import msgspec

from ..config import BackendConfig
from ..errors import ProtocolError, ServerError, ServerUnavailable
from ..fim_templates import ExtraChunk
from ..http_stream import Sent, StreamClient, StreamResponse, TransportError
from ..limits import MAX_SERVER_MESSAGE_CHARS, clip_message, read_error_body

__all__ = ["Backend", "Chunk", "FimRequest", "HttpBackend", "Started", "raise_for_status", "auth_headers", "connect_errors"]


# a request answer_now() left in flight: sent (maybe answered in part), or its head read
Started = Sent | StreamResponse


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
    # False: one answer instead of a stream, where the dialect can (llama.cpp). The engine
    # asks so of a server that writes the whole answer within a frame or two anyway.
    stream: bool = True
    # an unstreamed answer expected within a frame: awaited in poll() before the event loop
    # (HttpBackend.QUICK_ANSWER_S)
    quick: bool = False


class Chunk(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    done: bool = False
    # server counters on the last chunk, when it reports them (tokens, ms)
    timings: dict[str, float] | None = None
    # prompt tokens the server counted (to calibrate the token estimator)
    prompt_tokens: int | None = None
    # which candidate this text belongs to when n > 1
    index: int = 0
    # more chunks from the same network read follow at once (post-process after the last)
    more: bool = False
    # the texts of the stream events merged into this one (about a token each), when merged
    parts: tuple[str, ...] = ()


def batched(decode: Callable[[bytes], Chunk], batch: list[bytes]) -> Iterator[Chunk]:
    """The payloads of one network read decoded in order, all but the last marked `more`."""
    last = len(batch) - 1
    for i, payload in enumerate(batch):
        chunk = decode(payload)
        yield msgspec.structs.replace(chunk, more=True) if i < last else chunk


class Backend(Protocol):
    name: str
    # strings that end a completion (the FIM template's special tokens), cut client-side too
    stop_strings: tuple[str, ...]
    # whether one request can return several candidates (FimRequest.n)
    supports_n: bool
    # whether a request can continue a text: the prompt ends with the start of the middle, so
    # the same prompt plus the text so far asks for what follows it (staged requests need it)
    continues: bool
    # whether the prompt token count the server reports is of the whole prompt we sent;
    # servers that cut the prompt first (llama.cpp /infill, Ollama's num_ctx) under-count it,
    # and calibrating on that would make every later prompt too big
    counts_full_prompt: bool

    async def context_limit(self) -> int | None:
        """Tokens one request may use (per-slot context), or None when the server won't say."""
        ...

    def complete(self, req: FimRequest, started: Started | None = None) -> AsyncIterator[Chunk]:
        """Stream the completion; closing the iterator closes the HTTP stream (cancel).
        `started`: the request answer_now() left in flight; its answer is read instead."""
        ...

    def context_limit_now(self) -> int | None:
        """context_limit() without asking the server (only once answers_now is true)."""
        ...

    @property
    def answers_now(self) -> bool:
        """Whether a quick request (FimRequest.quick) can be made without the event loop now:
        the server was probed and its dialect answers unstreamed (see answer_now)."""
        ...

    def answer_now(self, req: FimRequest) -> Chunk | Started | None:
        """A quick request's whole answer without the event loop: its one (done) chunk when the
        server wrote it within QUICK_ANSWER_S; what is in flight when not, to be read by
        complete(req, started) or dropped by abort(); None when it cannot go so (nothing was
        sent). Raises BackendError as complete() would."""
        ...

    def close(self) -> None:
        """Drop kept connections (the backend is being replaced or the host stops)."""
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
        return clip_message(err, MAX_SERVER_MESSAGE_CHARS)
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return clip_message(str(err["message"]), MAX_SERVER_MESSAGE_CHARS)
    return clip_message(body[:200].decode("utf-8", "replace").strip(), MAX_SERVER_MESSAGE_CHARS)


async def raise_for_status(name: str, response: httpx.Response | StreamResponse) -> None:
    if isinstance(response, StreamResponse):
        status = response.status
        if status == 200:
            return
    else:
        status = response.status_code
        if status == 200:
            return
    body = await read_error_body(response)  # a bounded part (limits.py)
    message = error_message(body)
    if status == 503:
        raise ServerUnavailable(f"{name}: server not ready (503: {message or 'loading'})")
    err = _error_object(body)
    counted = err.get("n_prompt_tokens") if isinstance(err, dict) else None
    raise ServerError(f"{name}: HTTP {status}: {message}", status=status,
                      prompt_tokens=counted if isinstance(counted, int) and counted > 0 else None)


T = TypeVar("T")


class _Parser(Protocol):
    def feed(self, data: bytes) -> list[bytes]: ...

    def close(self) -> list[bytes]: ...


class HttpBackend:
    """What every dialect shares: auth, error translation, probes and the streamed payloads."""

    # after a read that delivered stream events, wait this long before the next read: the
    # first token is drawn at once, later ones arrive in batches (one post-processing pass and
    # at most one draw per batch instead of one per token; bench/run.py, host CPU per key)
    READ_PACE_S = 0.016
    # how long an unstreamed answer is awaited in poll(), blocking the loop (StreamClient.post)
    QUICK_ANSWER_S = 0.016
    # an unstreamed answer bigger than this is not a completion (a confused or hostile server)
    MAX_ANSWER_BYTES = 1 << 20

    def __init__(self, name: str, cfg: BackendConfig, client: httpx.AsyncClient) -> None:
        self.name = name
        self.cfg = cfg
        self.client = client  # probes (small JSON requests)
        self.streams = StreamClient(timeout=cfg.timeout_ms / 1000)  # the completion streams
        self.base = cfg.url.rstrip("/")

    def close(self) -> None:
        self.streams.close()

    async def complete(self, req: FimRequest, started: Started | None = None) -> AsyncIterator[Chunk]:
        """Backend.complete, in the dialect's request (_request) and events (_chunks)."""
        body: dict[str, Any] | None = None
        try:
            if started is None:
                path, body, parser, last = await self._request(req)
            else:  # out already (answer_now): its body is not rendered again, only its answer read
                path, parser, last = self._sent_request(req)
        except BaseException:
            if started is not None:
                started.abort()
            raise
        unstreamed = not req.stream if body is None else body.get("stream") is False
        # closed here when the last chunk returns, not by the garbage collector (whose
        # finalizer wakes the event loop through its self-pipe: two syscalls per request)
        async with aclosing(self.payloads(path, body, parser, last, unstreamed=unstreamed, quick=req.quick,
                                          started=started)) as batches:
            async for batch in batches:
                for chunk in self._chunks(batch):
                    yield chunk
                    if chunk.done:
                        return

    async def _request(self, req: FimRequest) -> tuple[str, dict[str, Any], _Parser, Callable[[bytes], bool]]:
        """The completion request's path and body, its stream's parser and what its final
        payload looks like (once the server is probed)."""
        raise NotImplementedError

    def _sent_request(self, req: FimRequest) -> tuple[str, _Parser, Callable[[bytes], bool]]:
        """_request() without the body, for a request answer_now() sent already."""
        raise NotImplementedError

    # Backend.answers_now: only a dialect that can ask for one unstreamed answer (llama.cpp)
    answers_now = False

    def context_limit_now(self) -> int | None:
        raise NotImplementedError

    def answer_now(self, req: FimRequest) -> Chunk | Started | None:
        """Backend.answer_now. Anything unusual (an error status, a streamed or partial answer)
        is left in flight for complete(), which reads and judges it as always."""
        if not (req.quick and not req.stream and self.answers_now):
            return None
        path, body = self._body_now(req)
        try:
            got = self.streams.post_now(self.base + path, _encode(body), auth_headers(self.cfg), self.QUICK_ANSWER_S,
                                        whole=True)
        except TransportError as exc:
            raise self._unreachable(exc) from exc
        if not isinstance(got, bytes):
            return got
        if len(got) > self.MAX_ANSWER_BYTES:
            raise ProtocolError(f"{self.name}: answer longer than {self.MAX_ANSWER_BYTES // 1024} KB")
        chunk = self._decode(got)
        return chunk if chunk.done else Chunk(text=chunk.text, done=True)

    def _body_now(self, req: FimRequest) -> tuple[str, dict[str, Any]]:
        """The request's path and body once the server is probed (answers_now)."""
        raise NotImplementedError

    def _chunks(self, batch: list[bytes]) -> Iterable[Chunk]:
        """One network read's payloads as chunks."""
        return batched(self._decode, batch)

    def _decode(self, payload: bytes) -> Chunk:
        raise NotImplementedError

    def _message(self, decoder: msgspec.json.Decoder[T], payload: bytes) -> T:
        """One stream payload decoded strictly; a malformed one, or one that carries the
        server's `error`, raises ProtocolError with the server's words."""
        try:
            msg = decoder.decode(payload)
        except (msgspec.DecodeError, ValueError) as exc:
            raise ProtocolError(f"{self.name}: malformed stream chunk ({exc})") from None
        error = getattr(msg, "error", None)
        if error is not None:
            raise ProtocolError(f"{self.name}: server error in stream: {str(error)[:300]}")
        return msg

    def forget(self) -> None:
        """The server went away: what was probed may differ when it comes back."""

    def _unreachable(self, exc: Exception) -> ServerUnavailable:
        self.forget()
        if type(exc).__name__ == "ReadTimeout" or (isinstance(exc, httpx.TimeoutException)
                                                   and not isinstance(exc, httpx.ConnectTimeout)):
            return ServerUnavailable(f"{self.name}: no answer from {self.cfg.url} in time")
        return ServerUnavailable(f"{self.name}: cannot reach {self.cfg.url} ({exc.__class__.__name__})", unreachable=True)

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

    async def _whole(self, response: StreamResponse) -> bytes:
        data = response.read_now()  # usually all there already
        if data is None:
            read = bytearray()
            async for piece in response.iter_raw():
                read += piece
                if len(read) > self.MAX_ANSWER_BYTES:
                    break  # no need to read the rest
            data = bytes(read)
        if len(data) > self.MAX_ANSWER_BYTES:
            raise ProtocolError(f"{self.name}: answer longer than {self.MAX_ANSWER_BYTES // 1024} KB")
        return data

    async def payloads(self, path: str, body: dict[str, Any] | None, parser: _Parser,
                       last: Callable[[bytes], bool] | None = None, *, unstreamed: bool,
                       quick: bool = False, started: Started | None = None) -> AsyncIterator[list[bytes]]:
        """The stream's payloads (SSE data or NDJSON lines), a list per network read; closing
        this closes the stream, which tells the server to stop.

        `last` recognises the server's final payload: the rest of the body (the chunked
        terminator) is read before that batch is handed over, so the connection is kept for
        the next request instead of closed as a cancel.

        An `unstreamed` request (`"stream": false`) answered with one JSON document yields that
        document as the only payload (a server that streams anyway is parsed as a stream). With
        `quick`, that answer is first awaited without the event loop (StreamClient.post).
        `started`: the request is already out (answer_now; `body` is None); its answer is read
        here.

        The last payloads are handed over after the response is closed: a consumer that stops
        at the final chunk must not leave the connection held until this generator is
        collected (the next request would open another one)."""
        final: list[bytes] = []
        try:
            wait_s = self.QUICK_ANSWER_S if unstreamed and quick else 0.0
            if started is None:
                assert body is not None
                response = await self.streams.post(self.base + path, _encode(body), auth_headers(self.cfg),
                                                   wait_s=wait_s)
            elif isinstance(started, Sent):
                response = await self.streams.finish(started)
            else:
                response = started
            async with response:
                await raise_for_status(self.name, response)
                if unstreamed and _whole_json(response):
                    final = [await self._whole(response)]
                else:
                    body_left = response.iter_raw()
                    async for data in body_left:
                        batch = parser.feed(data)
                        if not batch:
                            continue
                        if last is not None and last(batch[-1]):
                            try:
                                async with asyncio.timeout(0.5):
                                    async for _ in body_left:
                                        pass
                            except (TimeoutError, TransportError):
                                pass  # the connection is just not kept
                            final = batch
                            break
                        yield batch
                        await asyncio.sleep(self.READ_PACE_S)
                    else:
                        final = parser.close()
        except TransportError as exc:
            raise self._unreachable(exc) from exc
        except ValueError as exc:  # a line too long for the parser
            raise ProtocolError(f"{self.name}: {exc}") from None
        if final:
            yield final


def _whole_json(response: StreamResponse) -> bool:
    ctype = response.headers.get("content-type", "").lower()
    return "event-stream" not in ctype and "ndjson" not in ctype


_encoder = msgspec.json.Encoder()


def _encode(body: dict[str, Any]) -> bytes:
    try:
        return _encoder.encode(body)
    except UnicodeEncodeError:  # invalid UTF-8 in the buffer (pynvim's surrogateescape): \u-escape it
        return json.dumps(body).encode("ascii")
