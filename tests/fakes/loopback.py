"""An asyncio TCP server on 127.0.0.1 in a thread of its own: the base of the test servers."""

from __future__ import annotations

import asyncio
import socket
import threading


class LoopbackServer:
    """Listens from construction on; subclasses answer connections in `_handle`."""

    def __init__(self, port: int = 0) -> None:
        self.loop = asyncio.new_event_loop()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # take over a port just released
        sock.bind(("127.0.0.1", port))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._sock = sock
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()
        self._ready.wait(5)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._handle, sock=self._sock)
            self._ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    def close(self) -> None:
        async def shutdown() -> None:
            # end the handlers still answering (a stream the client left open) before the loop
            # stops, or their cleanup runs later on a closed loop
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(2)
