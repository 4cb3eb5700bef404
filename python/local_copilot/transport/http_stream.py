"""A small HTTP/1.1 client for completion streams, on asyncio streams.

Completion streams are the host's hot path: one request per keystroke, one event per token.
Through httpx each request costs a connection-pool round and five layers of async generators
per read, and no answer can be awaited without the event loop; `make bench`'s `httpx` profile
measures the difference. Even behind an httpx transport of this client's own, httpx's client
around each request and h11's framing would stay, one or two requests per key. This client
writes the request, parses the status line and headers, and hands back the body as each read
delivers it (chunked or not); it raises httpx's exceptions. Probes, health checks and
everything else keep httpx.

Plain http uses a non-blocking socket read with `loop.sock_recv` only when the caller asks
for data: between the caller's (paced) reads the kernel buffers the server's events, and one
read takes them all. asyncio's stream transports read every TCP segment as it arrives, one
event-loop wakeup per token whatever the caller does. https goes through asyncio streams.

Closing a stream before its end closes the connection: that is how a server learns the
completion is no longer wanted. A connection whose response was read to the end is kept for
the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
import time
from collections.abc import AsyncIterator
from types import TracebackType
from urllib.parse import urlsplit

import httpx

from .owner import check_peer
from .plain_http import AnswersPlainHttp, answers_plain_http, probe_worth

__all__ = [
    "ConnectError",
    "ConnectTimeout",
    "ReadTimeout",
    "RemoteProtocolError",
    "Sent",
    "StreamClient",
    "StreamResponse",
    "TransportError",
]

READ_SIZE = 256 * 1024


# httpx's exception tree, so the probes (httpx) and the completion streams (this client) fail
# alike; the class name goes into the user's message
TransportError = httpx.TransportError
ConnectError = httpx.ConnectError
ConnectTimeout = httpx.ConnectTimeout
ReadTimeout = httpx.ReadTimeout
RemoteProtocolError = httpx.RemoteProtocolError  # closed mid-response, or not HTTP at all


class _Conn:
    """One connection: `recv()` returns what has arrived (b"" at EOF), waiting only if nothing
    has. `pending` holds bytes read past the current response's head."""

    def __init__(self) -> None:
        self.pending = bytearray()
        self.released = 0.0  # time.monotonic() when its last response was read to the end

    async def send(self, data: bytes | memoryview) -> None:
        raise NotImplementedError

    async def recv(self) -> bytes:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def reusable(self, idle_s: float) -> bool:
        raise NotImplementedError


class _SocketConn(_Conn):
    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self._poll: select.poll | None = None

    def recv_within(self, seconds: float) -> bytes | None:
        """What arrives within `seconds`, waiting in poll() on this thread; None if nothing.

        This blocks the event loop, on purpose and briefly: see StreamClient.post(wait_s)."""
        if self._poll is None:
            self._poll = select.poll()
            self._poll.register(self.sock.fileno(), select.POLLIN)
        if not self._poll.poll(max(0, int(seconds * 1000))):
            return None
        try:
            return self.sock.recv(READ_SIZE)
        except BlockingIOError:
            return None

    def send_now(self, data: bytes) -> int:
        """Send what the socket's buffer takes without waiting (usually all of a request)."""
        try:
            return self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            return 0

    async def send(self, data: bytes | memoryview) -> None:
        await self.loop.sock_sendall(self.sock, data)

    async def recv(self) -> bytes:
        return await self.loop.sock_recv(self.sock, READ_SIZE)

    def abort(self) -> None:
        # RST at once (not a graceful FIN): the server's next write fails, generation stops
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        self.sock.close()

    def reusable(self, idle_s: float) -> bool:
        if self.sock.fileno() < 0:
            return False
        if idle_s < StreamClient.TRUSTED_IDLE_S:
            return True
        try:  # a kept connection the server closed meanwhile reads as EOF (or has stray bytes)
            self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            return False
        except BlockingIOError:
            return True  # nothing to read: still open and idle
        except OSError:
            return False


class _TlsConn(_Conn):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self.reader, self.writer = reader, writer

    async def send(self, data: bytes | memoryview) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def recv(self) -> bytes:
        return await self.reader.read(READ_SIZE)

    def abort(self) -> None:
        self.writer.transport.abort()

    def reusable(self, idle_s: float) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()


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

    async def _read(self) -> bytes:
        conn = self._conn
        if conn.pending:
            data, conn.pending = bytes(conn.pending), bytearray()
            return data
        try:
            async with asyncio.timeout(self._timeout):
                return await conn.recv()
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
            if buf:  # bytes past the terminator: the connection's state is unclear
                self._keep_alive = False
        elif self._length is not None:
            left = self._length
            while left > 0:
                data = await self._read()
                if not data:
                    raise RemoteProtocolError("the server closed the connection mid-response")
                if len(data) > left:  # bytes past this response are not ours
                    self._keep_alive = False
                    data = data[:left]
                left -= len(data)
                yield data
        else:  # the body ends when the server closes the connection
            self._keep_alive = False
            while data := await self._read():
                yield data
        self._complete = True

    async def read(self) -> bytes:
        return b"".join([data async for data in self.iter_raw()])

    def read_now(self) -> bytes | None:
        """The whole body if it has already arrived (a short unstreamed answer), else None."""
        conn = self._conn
        if self._chunked or self._length is None or conn is None or len(conn.pending) < self._length:
            return None
        if len(conn.pending) > self._length:
            self._keep_alive = False  # bytes past this response are not ours
        data, conn.pending = bytes(conn.pending[:self._length]), bytearray()
        self._complete = True
        return data

    def abort(self) -> None:
        """Drop the response unread: the connection closes (the server stops generating)."""
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is not None:
            conn.abort()

    def close(self) -> None:
        if self._conn is None:
            return
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if self._complete and self._keep_alive and not conn.pending:
            self._client._release(self._key, conn)
        else:
            conn.abort()  # at once: the server stops generating

    async def __aenter__(self) -> StreamResponse:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _plain_body(buf: bytearray, end: int) -> bytes | int | None:
    """The body of a response whose head is buf[:end], if it is the plain case: 200, a
    Content-Length, not chunked, not a stream, the connection kept open; an int while that
    many of its bytes are still to come. None when it is not plain, or bytes came past it
    (StreamResponse reads it). The plain case skips the head's full parse and a
    StreamResponse, once per keystroke."""
    if not buf.startswith(b"HTTP/1.1 200 "):
        return None
    head = bytes(buf[:end]).lower()
    if b"transfer-encoding:" in head or b"connection: close" in head or b"event-stream" in head or b"ndjson" in head:
        return None
    at = head.find(b"\r\ncontent-length:")
    if at < 0:
        return None
    stop = head.find(b"\r\n", at + 2)
    size = head[at + 17:end if stop < 0 else stop].strip()
    if not size.isdigit():
        return None
    missing = int(size) - (len(buf) - end - 4)
    if missing:
        return missing if missing > 0 else None
    return bytes(buf[end + 4:])


def _request_bytes(head: str, body: bytes, headers: dict[str, str]) -> bytes:
    extra = "".join(f"\r\n{k}: {v}" for k, v in headers.items())
    return f"{head}\r\nContent-Length: {len(body)}{extra}\r\n\r\n".encode("latin-1") + body


class Sent:
    """A request on its way (StreamClient.post_now): its connection, and what of it was sent
    and of the answer read so far (None: nothing yet)."""

    __slots__ = ("key", "conn", "request", "sent", "buf", "wait_s", "kept")

    def __init__(self, key: tuple[str, int, bool], conn: _Conn, request: bytes, sent: int | None,
                 buf: bytearray | None, wait_s: float, *, kept: bool = True) -> None:
        self.key, self.request, self.sent, self.buf = key, request, sent, buf
        self.conn: _Conn | None = conn  # None once finished or aborted
        self.wait_s = wait_s
        self.kept = kept  # a kept connection: one the server may have closed meanwhile

    def abort(self) -> None:
        """Drop the request (unless finish() took it): the server sees the connection close."""
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.abort()


class StreamClient:
    """POST a JSON body and stream the answer; idle connections are kept per host."""

    # A connection idle for less than this is used without first peeking whether the server
    # closed it (a syscall per keystroke): servers keep idle
    # connections for seconds (llama-server 5 s), and one closed anyway fails at once in
    # _send, which post() answers with a fresh connection.
    TRUSTED_IDLE_S = 1.0

    def __init__(self, *, timeout: float, connect_timeout: float = 2.0, tls: ssl.SSLContext | None = None) -> None:
        """`tls`: the context that checks an https server's certificate (access.tls_context:
        the entry's ca_file and tls_verify); None: the default trust."""
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._idle: dict[tuple[str, int, bool], list[_Conn]] = {}
        self._ssl: ssl.SSLContext | None = tls
        self._addrs: dict[tuple[str, int], tuple[int, tuple[object, ...]]] = {}
        self._routes: dict[str, tuple[tuple[str, int, bool], str]] = {}

    def _release(self, key: tuple[str, int, bool], conn: _Conn) -> None:
        idle = self._idle.setdefault(key, [])
        if len(idle) < 2:
            conn.released = time.monotonic()
            idle.append(conn)
        else:
            conn.abort()

    async def _address(self, host: str, port: int) -> tuple[int, tuple[object, ...]]:
        """Resolved once per host (getaddrinfo runs in a thread: not per request)."""
        found = self._addrs.get((host, port))
        if found is None:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
            found = (infos[0][0], infos[0][4])
            self._addrs[(host, port)] = found
        return found

    async def _connect(self, key: tuple[str, int, bool]) -> _Conn:
        host, port, tls = key
        if tls and self._ssl is None:
            from .access import tls_context

            self._ssl = tls_context()
        try:
            async with asyncio.timeout(self.connect_timeout):
                if tls:
                    return _TlsConn(*await asyncio.open_connection(host, port, ssl=self._ssl, limit=READ_SIZE))
                family, addr = await self._address(host, port)
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    await asyncio.get_running_loop().sock_connect(sock, addr)
                    check_peer(str(addr[0]), port)  # a server on this machine must be the user's (owner.py)
                except BaseException:
                    sock.close()
                    raise
                return _SocketConn(sock)
        except (TimeoutError, ssl.SSLError) as exc:  # access.tls_failure reads the cause of each
            if tls and probe_worth(exc) and await answers_plain_http(host, port):  # (the url's scheme is wrong)
                raise ConnectError(f"{host}:{port} answers plain http, not TLS") from AnswersPlainHttp()
            if isinstance(exc, ssl.SSLError):  # (the certificate's verdict)
                raise ConnectError(str(exc) or exc.__class__.__name__) from exc
            raise ConnectTimeout(f"no connection in {self.connect_timeout:g} s") from None
        except OSError as exc:
            raise ConnectError(str(exc) or exc.__class__.__name__) from None

    def _route(self, url: str) -> tuple[tuple[str, int, bool], str]:
        """The connection key and the request line with its fixed headers, once per URL."""
        found = self._routes.get(url)
        if found is None:
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
            head = "\r\n".join([f"POST {target} HTTP/1.1", f"Host: {host_header}", "Content-Type: application/json",
                                 "Accept: text/event-stream, application/x-ndjson, application/json"])
            found = self._routes[url] = (key, head)
        return found

    def post_now(self, url: str, body: bytes, headers: dict[str, str], wait_s: float, *,
                 whole: bool = False) -> bytes | StreamResponse | Sent | None:
        """post() as far as it goes without the event loop: on a kept connection, send the
        request and wait up to `wait_s` in poll() on this thread for the answer's head.

        A StreamResponse when the head came in time; else the request in flight (`Sent`:
        `await finish(sent)` reads its answer, `sent.abort()` drops it); None when no kept
        connection could take it (nothing was sent). For a server known to answer within a
        frame this is one request per keystroke with no task, timer or loop turn. With
        `whole`, a plain answer (200, one JSON document, all of it there) comes as its body's
        bytes and the connection is kept (see _plain_body)."""
        key, head = self._route(url)
        return self._on_kept(key, _request_bytes(head, body, headers), wait_s, whole)

    def _on_kept(self, key: tuple[str, int, bool], request: bytes, wait_s: float,
                 whole: bool) -> bytes | StreamResponse | Sent | None:
        """post_now() for a request already in bytes."""
        deadline = time.monotonic() + wait_s
        idle = self._idle.get(key) or []
        while idle:
            conn = idle.pop()
            if whole and not isinstance(conn, _SocketConn):  # TLS: nothing to wait for here
                idle.append(conn)
                return None
            if not conn.reusable(time.monotonic() - conn.released):
                conn.abort()
                continue
            try:
                sent, buf = self._start(conn, request, max(0.0, deadline - time.monotonic()))
                end = buf.find(b"\r\n\r\n")
                if end >= 0:
                    plain = _plain_body(buf, end) if whole else None
                    # the head and the body can come in two segments (two writes)
                    while isinstance(plain, int) and (left := deadline - time.monotonic()) > 0:
                        data = self._recv_within(conn, left)
                        if not data:
                            break
                        buf += data
                        plain = _plain_body(buf, end)
                    if isinstance(plain, bytes):
                        self._release(key, conn)
                        return plain
                    return self._response(key, conn, buf, end)
            except RemoteProtocolError:  # the server had closed it (or it answered garbage): the next
                conn.abort()
                continue
            return Sent(key, conn, request, sent, buf, wait_s)
        return None

    @staticmethod
    def _recv_within(conn: _Conn, seconds: float) -> bytes | None:
        if not isinstance(conn, _SocketConn):
            return None
        try:
            return conn.recv_within(seconds)
        except (ConnectionError, OSError):
            conn.abort()
            raise RemoteProtocolError("the server closed the connection mid-answer") from None

    async def post(self, url: str, body: bytes, headers: dict[str, str], *, wait_s: float = 0.0) -> StreamResponse:
        """Send the request and read the status line and headers (use as `async with`).

        With `wait_s`, the answer is first awaited for up to that long in poll() on this
        thread, blocking the event loop: for a server known to answer within a frame. Through
        the event loop the same wait costs two loop turns, a future and a task wakeup more per
        request, one request per keystroke. A snapshot that arrives meanwhile would wait for
        this answer anyway (see Engine.submit)."""
        key, head = self._route(url)
        request = _request_bytes(head, body, headers)
        got = self._on_kept(key, request, wait_s, False)
        if isinstance(got, StreamResponse):
            return got
        if got is None:  # no kept connection: a fresh one
            got = Sent(key, await self._connect(key), request, None, None, wait_s, kept=False)
        assert isinstance(got, Sent)
        return await self.finish(got)

    async def finish(self, sent: Sent) -> StreamResponse:
        """The answer's head for a request post_now() left in flight (or a fresh connection's)."""
        conn, sent.conn = sent.conn, None
        if conn is None:
            raise RemoteProtocolError("the request was dropped")
        try:
            return await self._send(sent.key, conn, sent.request, sent.wait_s, sent.sent, sent.buf)
        except RemoteProtocolError:
            if not sent.kept:
                raise
        # a kept connection the server had closed meanwhile: once more on a fresh one
        return await self._send(sent.key, await self._connect(sent.key), sent.request, sent.wait_s)

    @staticmethod
    def _start(conn: _Conn, request: bytes, wait_s: float) -> tuple[int, bytearray]:
        """Send what the socket takes now and wait up to `wait_s` for the answer, in poll();
        only with `wait_s` on a plain socket (else all of it is left to _send)."""
        buf = bytearray()
        sent = 0
        if wait_s > 0 and isinstance(conn, _SocketConn):
            try:
                sent = conn.send_now(request)
                if sent == len(request):
                    # sent at once and awaited in poll(): no timer, task or loop turn when the
                    # answer's head is there within wait_s (one request per keystroke)
                    data = conn.recv_within(wait_s)
                    if data is not None:
                        if not data:
                            raise ConnectionResetError("closed")
                        buf += data
            except (ConnectionError, OSError):
                conn.abort()
                raise RemoteProtocolError("the server closed the connection before answering") from None
        return sent, buf

    async def _send(self, key: tuple[str, int, bool], conn: _Conn, request: bytes, wait_s: float,
                    sent: int | None = None, buf: bytearray | None = None) -> StreamResponse:
        if sent is None or buf is None:
            sent, buf = self._start(conn, request, wait_s)
        try:
            if buf.find(b"\r\n\r\n") < 0:
                async with asyncio.timeout(self.timeout):
                    if sent < len(request):
                        await conn.send(memoryview(request)[sent:])
                    while buf.find(b"\r\n\r\n") < 0:
                        if len(buf) > 64 * 1024:
                            raise RemoteProtocolError("response headers longer than 64 KB")
                        data = await conn.recv()
                        if not data:
                            raise ConnectionResetError("closed")
                        buf += data
        except TimeoutError:
            conn.abort()
            raise ReadTimeout(f"no answer in {self.timeout:g} s") from None
        except (ConnectionError, OSError):
            conn.abort()
            raise RemoteProtocolError("the server closed the connection before answering") from None
        except BaseException:  # cancelled while waiting (the next keystroke): the server must see it
            conn.abort()
            raise
        return self._response(key, conn, buf, buf.find(b"\r\n\r\n"))

    def _response(self, key: tuple[str, int, bool], conn: _Conn, buf: bytearray, end: int) -> StreamResponse:
        """The status line and headers in buf[:end]; what follows is the body's start."""
        head = bytes(buf[:end]).decode("latin-1").split("\r\n")
        conn.pending = buf[end + 4:]
        try:
            _, code, *_ = head[0].split(" ", 2)
            status = int(code)
        except ValueError:
            conn.abort()
            raise RemoteProtocolError(f"not an HTTP answer: {head[0][:60]!r}") from None
        headers: dict[str, str] = {}
        for line in head[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        return StreamResponse(self, key, conn, status, headers, self.timeout)

    def close(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.abort()
        self._idle.clear()
