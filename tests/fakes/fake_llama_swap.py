"""A FAKE llama-swap (github.com/mostlygeek/llama-swap: a Go proxy that starts and swaps
llama-servers by the model a request names), in front of REAL tiny llama-servers. llama-swap
itself is not installed here; this follows its README and its proxymanager.go routes:

- POST /completion, /infill, /v1/completions, /v1/chat/completions: the body's `model` picks
  the upstream server; a model not running is started first and the request waits until its
  /health answers (llama-swap's healthCheckTimeout); without `model`: 400 "missing or invalid
  'model' key"; an unknown one: 400 "could not find suitable inference handler for NAME";
- one model runs at a time (llama-swap's default group: `swap: true`): starting one stops the
  other; `together=True` keeps them all (a group with `swap: false`);
- GET /v1/models: `{"object": "list", "data": [{"id", "object": "model", "created",
  "owned_by": "llama-swap"}]}`, sorted by id;
- GET /running: `{"running": [{"model", "state": "ready", ...}]}`, the models ready to answer;
- ANY /upstream/MODEL/PATH: passed through to MODEL's server (started first if need be);
- GET /health: 200 "OK"; any other path: 404 (llama-swap's NoRoute), so llama-server's own
  GET routes (/props, /slots) and /tokenize answer only through /upstream;
- a model whose server does not start: 500 "error proxying request: ..." (sendErrorResponse).

`load_delay_s` stands in for a model that takes a while to load (a real one takes seconds; a
tiny one a fraction): the server is started that much later. Every request is recorded as
(method, path, JSON body).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from local_copilot.server_options import ServerOptions
from local_copilot.servers.llama_cpp import LlamaServer

from .loopback import LoopbackServer

ROUTED = ("/completion", "/infill", "/v1/completions", "/v1/chat/completions")


class FakeLlamaSwap(LoopbackServer):
    def __init__(self, models: dict[str, Path], *, binary: str, log_dir: Path, load_delay_s: float = 0.0,
                 together: bool = False) -> None:
        self.models = models
        self.binary = binary
        self.log_dir = log_dir
        self.load_delay_s = load_delay_s
        self.together = together
        self.servers: dict[str, LlamaServer] = {}  # running (ready) upstream servers
        self.started: list[str] = []  # models started, in order
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self._loading: dict[str, asyncio.Task[LlamaServer]] = {}
        super().__init__()

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [body for _, p, body in self.requests if p == path]

    def close(self) -> None:
        super().close()
        for server in self.servers.values():
            server.stop()
        self.servers.clear()

    # -- upstream servers ------------------------------------------------------------------

    async def _upstream(self, model: str) -> LlamaServer:
        """`model`'s server, started (and the other stopped) first when it is not running."""
        if model in self.servers:
            return self.servers[model]
        task = self._loading.get(model)
        if task is None:
            task = self._loading[model] = asyncio.get_running_loop().create_task(self._start(model))
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._loading.pop(model, None)

    async def _start(self, model: str) -> LlamaServer:
        if not self.together:
            for other in list(self.servers):
                await asyncio.to_thread(self.servers.pop(other).stop)
        await asyncio.sleep(self.load_delay_s)
        self.started.append(model)
        server = LlamaServer.for_model(self.models[model], binary=self.binary, log_file=self.log_dir / f"{model}.log",
                                       options=ServerOptions(context_tokens=2048, parallel=1, extra_args=["-t", "1"]))
        await asyncio.to_thread(server.start)  # returns once its /health answers
        self.servers[model] = server
        return server

    # -- HTTP ------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target = lines[0].split(" ")[:2]
            length = next((int(ln.split(":", 1)[1]) for ln in lines if ln.lower().startswith("content-length:")), 0)
            body = await reader.readexactly(length) if length else b""
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            writer.close()
            return
        parts = urlsplit(target)
        path = parts.path
        try:
            parsed = json.loads(body) if body else {}
        except ValueError:
            parsed = {}
        self.requests.append((method, target, parsed if isinstance(parsed, dict) else {}))
        try:
            await self._route(method, path, parts.query, lines, body, parsed, writer)
        except RuntimeError as exc:  # the model's server did not start: llama-swap answers 500
            await _reply(writer, 500, f"error proxying request: unable to start process: {exc}")
        except ConnectionError:
            pass  # the client left (a cancel): closing upstream tells the server
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _route(self, method: str, path: str, query: str, lines: list[str], body: bytes, parsed: Any,
                     writer: asyncio.StreamWriter) -> None:
        if method == "POST" and path in ROUTED:
            model = parsed.get("model") if isinstance(parsed, dict) else None
            if not model:
                return await _reply(writer, 400, "missing or invalid 'model' key")
            if model not in self.models:
                return await _reply(writer, 400, f"could not find suitable inference handler for {model}")
            server = await self._upstream(model)
            return await _forward(server.port, lines, path + (f"?{query}" if query else ""), body, writer)
        if method == "GET" and path == "/v1/models":
            now = int(time.time())
            data = [{"id": m, "object": "model", "created": now, "owned_by": "llama-swap"} for m in sorted(self.models)]
            return await _reply(writer, 200, {"object": "list", "data": data})
        if method == "GET" and path == "/running":
            running = [{"model": m, "state": "ready", "cmd": "llama-server", "proxy": s.url, "ttl": 0}
                       for m, s in self.servers.items()]
            return await _reply(writer, 200, {"running": running})
        if method == "GET" and path == "/health":
            return await _reply(writer, 200, "OK")
        if path.startswith("/upstream/"):
            rest = unquote(path.removeprefix("/upstream/"))
            # a model id may hold slashes: the longest leading run of segments that names one
            segs = rest.split("/")
            found = next((i for i in range(len(segs), 0, -1) if "/".join(segs[:i]) in self.models), None)
            if found is None:
                return await _reply(writer, 400, "model id required in path")
            model, tail = "/".join(segs[:found]), "/" + "/".join(segs[found:])
            server = await self._upstream(model)
            return await _forward(server.port, lines, tail + (f"?{query}" if query else ""), body, writer)
        return await _reply(writer, 404, "404 page not found")


async def _reply(writer: asyncio.StreamWriter, status: int, payload: Any) -> None:
    data = (json.dumps(payload) if not isinstance(payload, str) else payload).encode()
    kind = "application/json" if not isinstance(payload, str) else "text/plain; charset=utf-8"
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}.get(status, "Error")
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {len(data)}\r\n"
                 "Connection: close\r\n\r\n".encode() + data)
    await writer.drain()


async def _forward(port: int, lines: list[str], target: str, body: bytes, writer: asyncio.StreamWriter) -> None:
    """The request to the upstream llama-server at `target`, its answer back byte for byte."""
    method = lines[0].split(" ")[0]
    kept = [ln for ln in lines[1:] if ln and not ln.lower().startswith(("connection:", "host:"))]
    up_r, up_w = await asyncio.open_connection("127.0.0.1", port)
    up_w.write(("\r\n".join([f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{port}", *kept, "Connection: close"])
                + "\r\n\r\n").encode("latin-1") + body)
    await up_w.drain()
    try:
        while data := await up_r.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        up_w.close()
