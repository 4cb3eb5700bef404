"""One completion request to a server: prepared once by its backend, sent once, its answer
read once, abortable at any point.

A backend's dialect turns a request into a `Wire` (path, body, the stream's parser, how its
payloads read as chunks) and hands it down with a `Link`: what the exchange reaches the server
through (the stream client, the headers, the server's `Faults`, its slots). The exchange
reads these and nothing of the backend: its failures come back as the errors `Faults` makes
(which tell the backend the one event `lost`), the slot it runs in is told to the backend's
`Slots` (backends/slots.py), and what the answer says (text, counters, the slot) comes back
in its chunks. A quick request (a short unstreamed answer from a server known to write it
within a frame) is first sent and awaited in poll() without the event loop (`answer_now()`):
its one chunk when the answer is there in time, read without suspending. An answer that is
not there in time stays inside the exchange until `chunks()` reads it through the loop or
`abort()` drops it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import msgspec

from ..errors import NotAStream, ProtocolError
from .http_stream import Sent, StreamResponse, TransportError
from .limits import MAX_ANSWER_BYTES

if TYPE_CHECKING:
    from .faults import Faults

__all__ = ["Exchange", "Link", "Wire"]


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
    # the dialect's completions (a chat-style request's chat events); None: the dialect's
    read: Callable[[list[bytes]], Iterable[Any]] | None = None


class Streams(Protocol):
    """The stream client (http_stream.StreamClient; bench/hooks' httpx one in `make bench`)."""

    def post_now(self, url: str, body: bytes, headers: dict[str, str], wait_s: float, *,
                 whole: bool = False) -> bytes | StreamResponse | Sent | None: ...

    async def post(self, url: str, body: bytes, headers: dict[str, str], *, wait_s: float = 0.0) -> StreamResponse: ...

    async def finish(self, sent: Sent) -> StreamResponse: ...


class Occupancy(Protocol):
    """The server's slots as this editor's requests leave them (backends/slots.py's Slots)."""

    def sent(self, slot: int | None) -> None: ...

    def ended(self, slot: int | None) -> None: ...


class Link(msgspec.Struct, frozen=True):
    """What one exchange reaches its server through, handed down by the backend that prepared
    it: the server's base URL, the stream client, the request's headers, the server's `Faults`,
    how its payloads read as chunks (`read`: a network read's; `decode`: one whole answer's),
    and the slots told when the request starts and ends."""

    base: str
    streams: Streams
    headers: dict[str, str]
    faults: Faults
    read: Callable[[list[bytes]], Iterable[Any]]
    decode: Callable[[bytes], Any]
    slots: Occupancy | None = None


class Exchange:
    # after a read that delivered stream events, wait this long before the next read: the
    # first token is drawn at once, later ones arrive in batches (one post-processing pass and
    # at most one draw per batch instead of one per token)
    READ_PACE_S = 0.016
    # how long an unstreamed quick answer is awaited in poll(), blocking the loop
    QUICK_ANSWER_S = 0.016

    def __init__(self, link: Link, wire: Wire, *, quick: bool = False, slot: int | None = None) -> None:
        """`quick`: its answer is awaited in poll() for up to QUICK_ANSWER_S (an unstreamed one
        from a server known to write it within a frame); `slot`: the server slot it names."""
        self.link, self.wire, self.slot = link, wire, slot
        self.unstreamed = wire.body.get("stream") is False
        self.quick = quick and self.unstreamed
        self._read = wire.read or link.read
        self._body = _encode(wire.body)
        self._url = link.base + wire.path
        self._inflight: Sent | StreamResponse | None = None  # sent by answer_now(), not read yet
        self.sent = False
        # the server's slots while this request holds one (told when it starts and ends)
        self._slots: Occupancy | None = None

    def answer_now(self) -> Any | None:
        """A quick request's whole answer, read without the event loop: its one chunk when the
        server wrote it within QUICK_ANSWER_S (see the module's doc). None otherwise: the
        request is in flight (`sent`) or was not sent (no kept connection, or not a quick
        request), and chunks() goes on from there; anything unusual (an error status, a
        streamed or partial answer) is left to chunks(), which reads and judges it as always.
        Raises BackendError."""
        if self.sent or not self.quick:
            return None
        link = self.link
        link.faults.check_held()
        try:
            got = link.streams.post_now(self._url, self._body, link.headers, self.QUICK_ANSWER_S, whole=True)
        except TransportError as exc:
            raise link.faults.unreachable(exc) from exc
        if got is None:
            return None
        self._sending()
        if not isinstance(got, bytes):
            self._inflight = got
            return None
        if len(got) > MAX_ANSWER_BYTES:
            raise ProtocolError(f"{link.faults.name}: answer longer than {MAX_ANSWER_BYTES // 1024} KB")
        self._judge(got, "")
        chunk = next(iter(self.wire.read([got]))) if self.wire.read is not None else link.decode(got)
        return chunk if chunk.done else msgspec.structs.replace(chunk, done=True)

    def abort(self) -> None:
        """Drop a request left in flight: the server sees the connection close."""
        slots, self._slots = self._slots, None
        if slots is not None:
            slots.ended(self.slot)
        inflight, self._inflight = self._inflight, None
        if isinstance(inflight, Sent):
            inflight.abort()
        elif inflight is not None:
            inflight.close()

    async def chunks(self) -> AsyncGenerator[Any, None]:
        """The answer as chunks, in the backend's dialect; closing this closes the stream,
        which tells the server to stop."""
        # closed here when the last chunk returns, not by the garbage collector (whose
        # finalizer wakes the event loop through its self-pipe: two syscalls per request)
        try:
            read = self._read
            async with aclosing(self._payloads()) as batches:
                async for batch in batches:
                    for chunk in read(batch):
                        yield chunk
                        if chunk.done:
                            return
        finally:
            self.abort()

    async def _respond(self) -> StreamResponse:
        link = self.link
        inflight, self._inflight = self._inflight, None
        if isinstance(inflight, StreamResponse):
            return inflight
        if isinstance(inflight, Sent):
            return await link.streams.finish(inflight)
        link.faults.check_held()
        self._sending()
        wait_s = self.QUICK_ANSWER_S if self.quick else 0.0
        return await link.streams.post(self._url, self._body, link.headers, wait_s=wait_s)

    async def _payloads(self) -> AsyncGenerator[list[bytes], None]:
        """The stream's payloads, a list per network read.

        `Wire.last` recognises the server's final payload: the rest of the body (the chunked
        terminator) is read before that batch is handed over, so the connection is kept for
        the next request instead of closed as a cancel. An unstreamed request answered with
        one JSON document yields that document as the only payload (a server that streams
        anyway is parsed as a stream). The last payloads are handed over after the response
        is closed: a consumer that stops at the final chunk must not leave the connection
        held until this generator is collected (the next request would open another one)."""
        faults, parser, last = self.link.faults, self.wire.parser, self.wire.last
        final: list[bytes] = []
        # a turn of the loop before anything that waits: a caller that stepped this exchange's
        # reading eagerly (eager.py) goes on in a task of its own from here, and the
        # timeouts below belong to that task
        await asyncio.sleep(0)
        try:
            response = await self._respond()
            async with response:
                await faults.raise_for_status(response)
                ctype = response.headers.get("content-type", "").lower()
                if "html" in ctype:
                    raise ProtocolError(faults.foreign("HTML"))
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
            raise faults.unreachable(exc) from exc
        except NotAStream as exc:
            raise ProtocolError(faults.foreign("HTML" if exc.sample.lstrip().startswith(b"<") else "text")) from None
        except ValueError as exc:  # a line too long for the parser
            raise ProtocolError(f"{faults.name}: {exc}") from None
        if final:
            yield final

    def _sending(self) -> None:
        self.sent = True
        slots = self._slots = self.link.slots
        if slots is not None:
            slots.sent(self.slot)

    def _judge(self, body: bytes, ctype: str) -> None:
        """A whole answer must be one JSON document: an HTML page or plain text (a proxy's
        error page, a login page) is said as such, not as a malformed chunk."""
        start = body[:64].lstrip()
        if start.startswith((b"{", b"[")) or not start:
            return
        raise ProtocolError(self.link.faults.foreign("HTML" if start.startswith(b"<") or "html" in ctype else "text"))

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
            raise ProtocolError(f"{self.link.faults.name}: answer longer than {MAX_ANSWER_BYTES // 1024} KB")
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
