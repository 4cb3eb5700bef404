"""A recording proxy in front of a REAL server: what the plugin sent, as the server got it.

One request per connection: the request goes upstream with `Connection: close`, the answer
comes back byte for byte, then both sides close. Bodies are recorded as parsed JSON.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any


class RecordingProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.headers: list[tuple[str, dict[str, str]]] = []  # (path, lower-cased headers) per request
        self.loop = asyncio.new_event_loop()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._sock = sock
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(self.loop)

            async def start() -> None:
                self._server = await asyncio.start_server(self._handle, sock=self._sock)
                ready.set()

            self.loop.run_until_complete(start())
            self.loop.run_forever()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        ready.wait(5)

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

    def close(self) -> None:
        async def shutdown() -> None:
            # end the handlers still relaying (a stream the client left open) before the loop
            # stops, or their cleanup runs later on a closed loop
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(2)
