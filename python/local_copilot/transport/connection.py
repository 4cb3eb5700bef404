"""One kept HTTP/1.1 connection of the stream client (http_stream.py): a plain socket read
with `loop.sock_recv` only when the caller asks for data (between the caller's paced reads the
kernel buffers the server's events, and one read takes them all), or TLS through asyncio
streams. Aborting one resets it, so the server's next write fails and generation stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket

__all__ = ["READ_SIZE", "TRUSTED_IDLE_S", "Conn", "SocketConn", "TlsConn"]

READ_SIZE = 256 * 1024

# A connection idle for less than this is used without first peeking whether the server
# closed it (a syscall per keystroke): servers keep idle connections for seconds (llama-server
# 5 s), and one closed anyway fails at once when the request is sent, which the client answers
# with a fresh connection.
TRUSTED_IDLE_S = 1.0


class Conn:
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


class SocketConn(Conn):
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
        if idle_s < TRUSTED_IDLE_S:
            return True
        try:  # a kept connection the server closed meanwhile reads as EOF (or has stray bytes)
            self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            return False
        except BlockingIOError:
            return True  # nothing to read: still open and idle
        except OSError:
            return False


class TlsConn(Conn):
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
