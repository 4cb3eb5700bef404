"""One completion request to a server: prepared once by its backend, sent once, its answer
read once, abortable at any point.

A backend turns a FimRequest into a `Wire` (path, body, the stream's parser) and hands back an
Exchange, whose `chunks()` sends the request and reads the answer. A quick request (a short
unstreamed answer from a server known to write it within a frame) is first sent and awaited
in poll() without the event loop (`answer_now()`): its one chunk when the answer is there in
time, read without suspending. An answer that is not there in time stays inside the exchange
until `chunks()` reads it through the loop or `abort()` drops it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import msgspec

from ..errors import NotAStream, ProtocolError
from ..transport.http_stream import Sent, StreamResponse, TransportError
from ..transport.limits import MAX_ANSWER_BYTES

if TYPE_CHECKING:
    from ..prompt.slots import Slots
    from .base import Chunk, FimRequest, HttpBackend

__all__ = ["Exchange", "Wire"]


class Parser(Protocol):
    def feed(self, data: bytes) -> list[bytes]: ...

    def close(self) -> list[bytes]: ...


class Wire(NamedTuple):
    """What one request sends, and how its answer reads."""

    path: str
    body: dict[str, Any]
    parser: Parser  # SSE data or NDJSON lines
    # recognises the server's final payload (None: only the end of the body says so)
    last: Callable[[bytes], bool] | None
    # one network read's payloads as chunks, where this request's answer reads otherwise than
    # the backend's completions (a chat-style request's chat events); None: the backend's
    read: Callable[[list[bytes]], Iterable[Chunk]] | None = None


class Exchange:
    # after a read that delivered stream events, wait this long before the next read: the
    # first token is drawn at once, later ones arrive in batches (one post-processing pass and
    # at most one draw per batch instead of one per token)
    READ_PACE_S = 0.016
    # how long an unstreamed quick answer is awaited in poll(), blocking the loop
    QUICK_ANSWER_S = 0.016

    def __init__(self, backend: HttpBackend, req: FimRequest, wire: Wire) -> None:
        self.backend, self.req, self.wire = backend, req, wire
        self.unstreamed = wire.body.get("stream") is False
        self._body = _encode(wire.body)
        self._url = backend.base + wire.path
        self._inflight: Sent | StreamResponse | None = None  # sent by answer_now(), not read yet
        self.sent = False
        # the server's slots, told when this request starts and ends (backends/slots.py)
        self._slots: Slots | None = None

    def answer_now(self) -> Chunk | None:
        """A quick request's whole answer, read without the event loop: its one chunk when the
        server wrote it within QUICK_ANSWER_S (see the module's doc). None otherwise: the
        request is in flight (`sent`) or was not sent (no kept connection, or not a quick
        request), and chunks() goes on from there; anything unusual (an error status, a
        streamed or partial answer) is left to chunks(), which reads and judges it as always.
        Raises BackendError."""
        if self.sent or not (self.req.quick and self.unstreamed):
            return None
        b = self.backend
        b.check_held()
        try:
            got = b.streams.post_now(self._url, self._body, b.headers(), self.QUICK_ANSWER_S, whole=True)
        except TransportError as exc:
            raise b.unreachable(exc) from exc
        if got is None:
            return None
        self._sending()
        if not isinstance(got, bytes):
            self._inflight = got
            return None
        if len(got) > MAX_ANSWER_BYTES:
            raise ProtocolError(f"{b.name}: answer longer than {MAX_ANSWER_BYTES // 1024} KB")
        self._judge(got, "")
        chunk = next(iter(self.wire.read([got]))) if self.wire.read is not None else b.decode(got)
        return chunk if chunk.done else msgspec.structs.replace(chunk, done=True)

    def abort(self) -> None:
        """Drop a request left in flight: the server sees the connection close."""
        slots, self._slots = self._slots, None
        if slots is not None:
            slots.ended(self.req.slot)
        inflight, self._inflight = self._inflight, None
        if isinstance(inflight, Sent):
            inflight.abort()
        elif inflight is not None:
            inflight.close()

    async def chunks(self) -> AsyncGenerator[Chunk, None]:
        """The answer as chunks, in the backend's dialect; closing this closes the stream,
        which tells the server to stop."""
        # closed here when the last chunk returns, not by the garbage collector (whose
        # finalizer wakes the event loop through its self-pipe: two syscalls per request)
        try:
            read = self.wire.read or self.backend.chunks
            async with aclosing(self._payloads()) as batches:
                async for batch in batches:
                    for chunk in read(batch):
                        yield chunk
                        if chunk.done:
                            return
        finally:
            self.abort()

    async def _respond(self) -> StreamResponse:
        b = self.backend
        inflight, self._inflight = self._inflight, None
        if isinstance(inflight, StreamResponse):
            return inflight
        if isinstance(inflight, Sent):
            return await b.streams.finish(inflight)
        b.check_held()
        self._sending()
        wait_s = self.QUICK_ANSWER_S if self.unstreamed and self.req.quick else 0.0
        return await b.streams.post(self._url, self._body, b.headers(), wait_s=wait_s)

    async def _payloads(self) -> AsyncGenerator[list[bytes], None]:
        """The stream's payloads, a list per network read.

        `Wire.last` recognises the server's final payload: the rest of the body (the chunked
        terminator) is read before that batch is handed over, so the connection is kept for
        the next request instead of closed as a cancel. An unstreamed request answered with
        one JSON document yields that document as the only payload (a server that streams
        anyway is parsed as a stream). The last payloads are handed over after the response
        is closed: a consumer that stops at the final chunk must not leave the connection
        held until this generator is collected (the next request would open another one)."""
        b, parser, last = self.backend, self.wire.parser, self.wire.last
        final: list[bytes] = []
        # a turn of the loop before anything that waits: a caller that stepped this exchange's
        # reading eagerly (eager.py) goes on in a task of its own from here, and the
        # timeouts below belong to that task
        await asyncio.sleep(0)
        try:
            response = await self._respond()
            async with response:
                await b.raise_for_status(response)
                ctype = response.headers.get("content-type", "").lower()
                if "html" in ctype:
                    raise ProtocolError(self._foreign("HTML"))
                if self.unstreamed and _whole_json(response):
                    final = [await self._whole(response)]
                    self._judge(final[0], ctype)
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
            raise b.unreachable(exc) from exc
        except NotAStream as exc:
            raise ProtocolError(self._foreign("HTML" if exc.sample.lstrip().startswith(b"<") else "text")) from None
        except ValueError as exc:  # a line too long for the parser
            raise ProtocolError(f"{b.name}: {exc}") from None
        if final:
            yield final

    def _sending(self) -> None:
        self.sent = True
        self._slots = self.backend.slots
        self._slots.sent(self.req.slot)

    def _foreign(self, what: str) -> str:
        b = self.backend
        return (f"{b.name}: the server at {b.cfg.url} answered {what}, not a completion stream"
                " (is that address the model server's, not a proxy's or a web page's?)")

    def _judge(self, body: bytes, ctype: str) -> None:
        """A whole answer must be one JSON document: an HTML page or plain text (a proxy's
        error page, a login page) is said as such, not as a malformed chunk."""
        start = body[:64].lstrip()
        if start.startswith((b"{", b"[")) or not start:
            return
        raise ProtocolError(self._foreign("HTML" if start.startswith(b"<") or "html" in ctype else "text"))

    async def _whole(self, response: StreamResponse) -> bytes:
        data = response.read_now()  # usually all there already
        if data is None:
            read = bytearray()
            async for piece in response.iter_raw():
                read += piece
                if len(read) > MAX_ANSWER_BYTES:
                    break  # no need to read the rest
            data = bytes(read)
        if len(data) > MAX_ANSWER_BYTES:
            raise ProtocolError(f"{self.backend.name}: answer longer than {MAX_ANSWER_BYTES // 1024} KB")
        return data


def _whole_json(response: StreamResponse) -> bool:
    ctype = response.headers.get("content-type", "").lower()
    return "event-stream" not in ctype and "ndjson" not in ctype


_encoder = msgspec.json.Encoder()


def _encode(body: dict[str, Any]) -> bytes:
    try:
        return _encoder.encode(body)
    except UnicodeEncodeError:  # invalid UTF-8 in the buffer (pynvim's surrogateescape): \u-escape it
        return json.dumps(body).encode("ascii")
