"""A streamed answer's status and headers, and its body as each network read delivers it
(chunked, of a Content-Length, or until the server closes); closed before its end, its
connection is reset (the server stops generating), read to its end, kept for the next request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Protocol

from httpx import ReadTimeout, RemoteProtocolError

from .chunked import Dechunker
from .connection import Conn

__all__ = ["StreamResponse"]


class Releases(Protocol):
    """Where a connection read to its end goes back (http_stream.StreamClient's idle ones)."""

    def _release(self, key: tuple[str, int, bool], conn: Conn) -> None: ...


class StreamResponse:
    """Status and headers of a response; `iter_raw()` yields the body as it arrives."""

    def __init__(self, client: Releases, key: tuple[str, int, bool], conn: Conn, status: int,
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
            decoder = Dechunker()
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
