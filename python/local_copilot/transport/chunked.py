"""`Transfer-Encoding: chunked`, decoded as the bytes arrive (http_stream.py's responses)."""

from __future__ import annotations

from httpx import RemoteProtocolError

__all__ = ["Dechunker"]


class Dechunker:
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
