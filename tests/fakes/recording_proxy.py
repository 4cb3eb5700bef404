"""A recording proxy in front of a REAL server: what the plugin sent, as the server got it.

One request per connection: the request goes upstream with `Connection: close`, the answer
comes back byte for byte, then both sides close. Bodies are recorded as parsed JSON.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from .loopback import LoopbackServer


class RecordingProxy(LoopbackServer):
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.headers: list[tuple[str, dict[str, str]]] = []  # (path, lower-cased headers) per request
        super().__init__()

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body in self.requests if p == path]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        length = next((int(ln.split(":", 1)[1]) for ln in lines if ln.lower().startswith("content-length:")), 0)
        body = await reader.readexactly(length) if length else b""
        self.requests.append((path, json.loads(body) if body else {}))
        self.headers.append((path, {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}))
        kept = [ln for ln in lines[1:] if ln and not ln.lower().startswith("connection:")]
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        up_w.write(("\r\n".join([lines[0], *kept, "Connection: close"]) + "\r\n\r\n").encode("latin-1") + body)
        await up_w.drain()
        try:
            while data := await up_r.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass  # the client closed mid-stream (a cancel); closing upstream tells the server
        finally:
            up_w.close()
            writer.close()
