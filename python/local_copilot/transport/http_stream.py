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
for data (connection.py): between the caller's (paced) reads the kernel buffers the server's
events, and one read takes them all. asyncio's stream transports read every TCP segment as it
arrives, one event-loop wakeup per token whatever the caller does. https goes through asyncio
streams. The response's head and body are read in response.py (chunked bodies: chunked.py).

Closing a stream before its end closes the connection: that is how a server learns the
completion is no longer wanted. A connection whose response was read to the end is kept for
the next request.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from urllib.parse import urlsplit

import httpx

from .connection import READ_SIZE, TRUSTED_IDLE_S, Conn, SocketConn, TlsConn
from .owner import check_peer
from .plain_http import AnswersPlainHttp, answers_plain_http, probe_worth
from .response import StreamResponse

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

# httpx's exception tree, so the probes (httpx) and the completion streams (this client) fail
# alike; the class name goes into the user's message
TransportError = httpx.TransportError
ConnectError = httpx.ConnectError
ConnectTimeout = httpx.ConnectTimeout
ReadTimeout = httpx.ReadTimeout
RemoteProtocolError = httpx.RemoteProtocolError  # closed mid-response, or not HTTP at all


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

    def __init__(self, key: tuple[str, int, bool], conn: Conn, request: bytes, sent: int | None,
                 buf: bytearray | None, wait_s: float, *, kept: bool = True) -> None:
        self.key, self.request, self.sent, self.buf = key, request, sent, buf
        self.conn: Conn | None = conn  # None once finished or aborted
        self.wait_s = wait_s
        self.kept = kept  # a kept connection: one the server may have closed meanwhile

    def abort(self) -> None:
        """Drop the request (unless finish() took it): the server sees the connection close."""
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.abort()


class StreamClient:
    """POST a JSON body and stream the answer; idle connections are kept per host."""

    # a kept connection idle for less than this is used without peeking first (connection.py):
    # one closed anyway fails at once in _send, which post() answers with a fresh connection
    TRUSTED_IDLE_S = TRUSTED_IDLE_S

    def __init__(self, *, timeout: float, connect_timeout: float = 2.0, tls: ssl.SSLContext | None = None) -> None:
        """`tls`: the context that checks an https server's certificate (access.tls_context:
        the entry's ca_file and tls_verify); None: the default trust."""
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._idle: dict[tuple[str, int, bool], list[Conn]] = {}
        self._ssl: ssl.SSLContext | None = tls
        self._addrs: dict[tuple[str, int], tuple[int, tuple[object, ...]]] = {}
        self._routes: dict[str, tuple[tuple[str, int, bool], str]] = {}

    def _release(self, key: tuple[str, int, bool], conn: Conn) -> None:
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

    async def _connect(self, key: tuple[str, int, bool]) -> Conn:
        host, port, tls = key
        if tls and self._ssl is None:
            from .access import tls_context

            self._ssl = tls_context()
        try:
            async with asyncio.timeout(self.connect_timeout):
                if tls:
                    return TlsConn(*await asyncio.open_connection(host, port, ssl=self._ssl, limit=READ_SIZE))
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
                return SocketConn(sock)
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
            if whole and not isinstance(conn, SocketConn):  # TLS: nothing to wait for here
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
    def _recv_within(conn: Conn, seconds: float) -> bytes | None:
        if not isinstance(conn, SocketConn):
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
    def _start(conn: Conn, request: bytes, wait_s: float) -> tuple[int, bytearray]:
        """Send what the socket takes now and wait up to `wait_s` for the answer, in poll();
        only with `wait_s` on a plain socket (else all of it is left to _send)."""
        buf = bytearray()
        sent = 0
        if wait_s > 0 and isinstance(conn, SocketConn):
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

    async def _send(self, key: tuple[str, int, bool], conn: Conn, request: bytes, wait_s: float,
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

    def _response(self, key: tuple[str, int, bool], conn: Conn, buf: bytearray, end: int) -> StreamResponse:
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
