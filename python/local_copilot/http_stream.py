"""A small HTTP/1.1 client for completion streams, on asyncio streams.

Completion streams are the host's hot path: one request per keystroke, one event per token.
Through httpx each request cost a connection-pool round, an `import sniffio` attempt and five
layers of async generators per read; the host spent ~1 ms of CPU per streamed token
(bench/run.py, py-spy), against a budget of 1 ms per keystroke in all. This client writes
the request, parses the status line and headers, and hands back the body as each read
delivers it (chunked or not). Probes, health checks and everything else keep httpx.

Closing a stream before its end closes the connection: that is how a server learns the
completion is no longer wanted. A connection whose response was read to the end is kept for
the next request.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from types import TracebackType
from urllib.parse import urlsplit

__all__ = [
    "ConnectError",
    "ConnectTimeout",
    "ReadTimeout",
    "RemoteProtocolError",
    "StreamClient",
    "StreamResponse",
    "TransportError",
]

READ_SIZE = 256 * 1024


class TransportError(Exception):
    """The connection failed; the class name goes into the user's message."""


class ConnectError(TransportError):
    pass


class ConnectTimeout(TransportError):
    pass


class ReadTimeout(TransportError):
    pass


class RemoteProtocolError(TransportError):
    """The server closed the connection mid-response or sent something that is not HTTP."""


_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _Dechunker:
    """Incremental `Transfer-Encoding: chunked` decoder: feed it the receive buffer, get the
    payload bytes that are complete so far (partial chunks included, so one huge chunk is
    not held back until it ends)."""

    def __init__(self) -> None:
        self.left = 0  # bytes still to come in the current chunk
        self.crlf = False  # a chunk's data ended; its CRLF is next
        self.trailers = False  # the last (zero) chunk came; trailer lines until a blank one
        self.finished = False

    def feed(self, buf: bytearray) -> bytes:
        out: list[bytes] = []
        pos, end = 0, len(buf)
        while pos < end and not self.finished:
            if self.left:
                take = min(self.left, end - pos)
                out.append(bytes(buf[pos:pos + take]))
                pos += take
                self.left -= take
                self.crlf = self.left == 0
                continue
            if self.crlf:
                if end - pos < 2:
                    break
                if buf[pos:pos + 2] != b"\r\n":
                    raise RemoteProtocolError("a chunk did not end with CRLF")
                pos += 2
                self.crlf = False
                continue
            nl = buf.find(b"\r\n", pos)
            if nl < 0:
                if end - pos > 1024:
                    raise RemoteProtocolError("a chunk size line longer than 1 KB")
                break
            line = bytes(buf[pos:nl])
            pos = nl + 2
            if self.trailers:
                self.finished = not line
                continue
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise RemoteProtocolError(f"bad chunk size {line[:40]!r}") from None
            if size == 0:
                self.trailers = True
            self.left = size
        del buf[:pos]
        return b"".join(out)


class StreamResponse:
    """Status and headers of a response; `iter_raw()` yields the body as it arrives."""

    def __init__(self, client: StreamClient, key: tuple[str, int, bool], conn: _Conn, status: int,
                 headers: dict[str, str], read_timeout: float) -> None:
        self._client, self._key, self._conn = client, key, conn
        self.status = status
        self.headers = headers
        self._timeout = read_timeout
        self._complete = False  # the body was read to its end
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self._length = int(length) if length and length.isdigit() else None
        self._keep_alive = headers.get("connection", "").lower() != "close"

    async def _read(self, n: int = READ_SIZE) -> bytes:
        try:
            async with asyncio.timeout(self._timeout):
                return await self._conn[0].read(n)
        except TimeoutError:
            raise ReadTimeout(f"no data in {self._timeout:g} s") from None
        except (ConnectionError, OSError) as exc:
            raise RemoteProtocolError(str(exc) or exc.__class__.__name__) from None

    async def iter_raw(self) -> AsyncIterator[bytes]:
        """The body, one piece per network read (several stream events at once when they
        queued up, which is what keeps the per-token cost down)."""
        if self._chunked:
            decoder = _Dechunker()
            buf = bytearray()
            while not decoder.finished:
                data = await self._read()
                if not data:
                    raise RemoteProtocolError("the server closed the connection mid-response")
                buf += data
                out = decoder.feed(buf)
                if out:
                    yield out
        elif self._length is not None:
            left = self._length
            while left > 0:
                data = await self._read(min(left, READ_SIZE))
                if not data:
                    raise RemoteProtocolError("the server closed the connection mid-response")
                left -= len(data)
                yield data
        else:  # the body ends when the server closes the connection
            self._keep_alive = False
            while data := await self._read():
                yield data
        self._complete = True

    async def read(self) -> bytes:
        return b"".join([data async for data in self.iter_raw()])

    def close(self) -> None:
        if self._conn is None:
            return
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if self._complete and self._keep_alive:
            self._client._release(self._key, conn)
        else:
            conn[1].transport.abort()  # at once: the server stops generating

    async def __aenter__(self) -> StreamResponse:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class StreamClient:
    """POST a JSON body and stream the answer; idle connections are kept per host."""

    def __init__(self, *, timeout: float, connect_timeout: float = 2.0) -> None:
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._idle: dict[tuple[str, int, bool], list[_Conn]] = {}
        self._ssl: ssl.SSLContext | None = None

    def _release(self, key: tuple[str, int, bool], conn: _Conn) -> None:
        idle = self._idle.setdefault(key, [])
        if len(idle) < 2 and not conn[0].at_eof():
            idle.append(conn)
        else:
            conn[1].transport.abort()

    async def _connect(self, key: tuple[str, int, bool]) -> _Conn:
        host, port, tls = key
        if tls and self._ssl is None:
            self._ssl = ssl.create_default_context()
        try:
            async with asyncio.timeout(self.connect_timeout):
                return await asyncio.open_connection(host, port, ssl=self._ssl if tls else None, limit=READ_SIZE)
        except TimeoutError:
            raise ConnectTimeout(f"no connection in {self.connect_timeout:g} s") from None
        except (OSError, ssl.SSLError) as exc:
            raise ConnectError(str(exc) or exc.__class__.__name__) from None

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> StreamResponse:
        """Send the request and read the status line and headers (use as `async with`)."""
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        host = parts.hostname or "localhost"
        key = (host, parts.port or (443 if tls else 80), tls)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        host_header = host if parts.port is None else f"{host}:{parts.port}"
        if ":" in host and not host.startswith("["):  # IPv6 literal
            host_header = f"[{host}]" + ("" if parts.port is None else f":{parts.port}")
        head = [f"POST {target} HTTP/1.1", f"Host: {host_header}", "Content-Type: application/json",
                "Accept: text/event-stream, application/x-ndjson, application/json",
                f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        # a kept connection the server has closed meanwhile fails at once: then a fresh one
        idle = self._idle.get(key) or []
        while idle:
            conn = idle.pop()
            try:
                return await self._send(key, conn, request)
            except RemoteProtocolError:
                conn[1].transport.abort()
        return await self._send(key, await self._connect(key), request)

    async def _send(self, key: tuple[str, int, bool], conn: _Conn, request: bytes) -> StreamResponse:
        reader, writer = conn
        lines: list[bytes] = []
        try:
            writer.write(request)
            async with asyncio.timeout(self.timeout):
                await writer.drain()
                status_line = await reader.readuntil(b"\r\n")
                while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
                    lines.append(line)
                    if len(lines) > 200:
                        raise asyncio.LimitOverrunError("too many header lines", 0)
        except TimeoutError:
            writer.transport.abort()
            raise ReadTimeout(f"no answer in {self.timeout:g} s") from None
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, OSError):
            writer.transport.abort()
            raise RemoteProtocolError("the server closed the connection before answering") from None
        try:
            _, code, *_ = status_line.decode("latin-1").split(" ", 2)
            status = int(code)
        except ValueError:
            writer.transport.abort()
            raise RemoteProtocolError(f"not an HTTP answer: {status_line[:60]!r}") from None
        headers: dict[str, str] = {}
        for raw in lines:
            name, sep, value = raw.decode("latin-1").partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        return StreamResponse(self, key, conn, status, headers, self.timeout)

    def close(self) -> None:
        for conns in self._idle.values():
            for _, writer in conns:
                writer.transport.abort()
        self._idle.clear()
