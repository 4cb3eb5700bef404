"""A FAKE model server on loopback, for what no real server does on demand: exact timing,
cut streams, resets, malformed chunks. Real-server behaviour is tested against llama-server.

Each request is answered by `script(path, body) -> list of steps`; a step is bytes to send,
a float (seconds to wait), or one of the actions RESET / CLOSE. Requests are recorded, and
`disconnects` counts streams the client closed before the script ended.

llama.cpp's vocabulary probe (`/tokenize` with `with_pieces`) is answered by the fake itself:
one piece per character, i.e. a vocabulary without FIM tokens, so the llama.cpp backend uses
`/infill`; set `fim_tokens` (e.g. QWEN_FIM) to make those strings single tokens and get the
client-rendered `/completion` path.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any

import msgspec

from .loopback import LoopbackServer

RESET = "reset"
CLOSE = "close"

Step = bytes | float | str
# (status, steps), or (status, steps, headers): headers sent with the answer, over the
# defaults of the same name (content-type: text/html, location: for a redirect, retry-after)
Script = Callable[[str, dict[str, Any]], tuple[int, list[Step]] | tuple[int, list[Step], dict[str, str]]]


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def infill_stream(tokens: list[str], delay: float = 0.0) -> list[Step]:
    steps: list[Step] = []
    for tok in tokens:
        if delay:
            steps.append(delay)
        steps.append(sse({"content": tok, "stop": False}))
    steps.append(sse({"content": "", "stop": True, "timings": {"predicted_n": len(tokens)}}))
    return steps


# the answers made of the scripts' streams, by stream: the fake runs in the test's process, and
# decoding and encoding a large answer anew per request (10 MB: ~60 ms holding the GIL) made the
# test's own round trips to Neovim wait, which the fault tests then read as Neovim's
_ONE_ANSWERS: dict[tuple[Any, ...], list[Step]] = {}


def one_answer(steps: list[Step]) -> list[Step]:
    """A scripted SSE stream as llama-server answers `"stream": false`: after the stream's
    delays, one JSON document with all the content and the last event's other fields. From a
    reset, a close or bytes that are no well-formed event on, the script's steps go out as
    they are (a broken answer stays broken, a cut one is cut)."""
    try:
        key: tuple[Any, ...] | None = tuple(steps)
        hash(key)
    except TypeError:
        key = None
    if key is not None and key in _ONE_ANSWERS:
        return list(_ONE_ANSWERS[key])
    answer = _one_answer(steps)
    if key is not None and len(_ONE_ANSWERS) < 256:
        _ONE_ANSWERS[key] = answer
    return list(answer)


def _one_answer(steps: list[Step]) -> list[Step]:
    delay, content, last = 0.0, "", {}
    for i, step in enumerate(steps):
        if isinstance(step, float):
            delay += step
            continue
        if isinstance(step, bytes) and step.startswith(b"data: "):
            try:
                event = msgspec.json.decode(step[6:])  # (a 10 MB event: json's ~6x the time)
            except msgspec.DecodeError:
                event = None
            if isinstance(event, dict):
                content += event.get("content", "")
                last = event
                continue
        return [delay, *steps[i:]]
    return [delay, msgspec.json.encode({**last, "content": content, "stop": True})]


QWEN_FIM = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>")


def llama_props(n_ctx: int = 4096, slots: int = 1) -> list[Step]:
    return [json.dumps({"default_generation_settings": {"n_ctx": n_ctx}, "total_slots": slots}).encode()]


def llama(stream: list[Step], n_ctx: int = 4096) -> Script:
    """A llama.cpp-shaped fake: /props, then `stream` for every /infill."""
    return lambda path, body: (200, llama_props(n_ctx)) if path == "/props" else (200, list(stream))


class FakeServer(LoopbackServer):
    def __init__(self, script: Script, *, port: int = 0) -> None:
        self.script = script
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.disconnects = 0
        # seconds of silence before the status line (a server that accepted but hangs)
        self.first_byte_delay = 0.0
        # strings the /tokenize probe reports as single tokens (see the module doc)
        self.fim_tokens: tuple[str, ...] = ()
        super().__init__(port)

    def _pieces(self, content: str) -> bytes:
        pieces: list[str] = []
        for part in content.split("\n"):
            pieces += [part] if part in self.fim_tokens else list(part)
            pieces.append("\n")
        return json.dumps({"tokens": [{"id": i, "piece": p} for i, p in enumerate(pieces[:-1])]}).encode()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return  # the client closed an idle keep-alive connection

                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
                length = int(headers.get("content-length", "0"))
                raw = await reader.readexactly(length) if length else b""
                body = json.loads(raw) if raw else {}
                body["_headers"] = headers
                self.requests.append((path, body))
                headers_out: dict[str, str] = {}
                if path == "/tokenize" and body.get("with_pieces"):
                    status, steps = 200, [self._pieces(body.get("content", ""))]
                else:
                    answer = self.script(path, body)
                    status, steps = answer[0], answer[1]
                    headers_out = dict(answer[2]) if len(answer) > 2 else {}  # type: ignore[misc]
                if self.first_byte_delay:
                    await asyncio.sleep(self.first_byte_delay)
                given = headers_out.pop("content-type", None)
                ctype = given or ("application/x-ndjson" if path.startswith("/api/") else "text/event-stream")
                more = "".join(f"{k}: {v}\r\n" for k, v in headers_out.items())
                if (body.get("stream") is False and path in ("/completion", "/infill") and status == 200
                        and isinstance(steps, list)):  # an endless generator streams anyway
                    steps, ctype = one_answer(steps), given or "application/json"  # as llama-server does
                    if len(steps) == 2 and isinstance(steps[0], float) and isinstance(steps[1], bytes):
                        # a whole answer goes out with its length, as llama-server sends it
                        await asyncio.sleep(steps[0])
                        writer.write(f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\n{more}"
                                     f"content-length: {len(steps[1])}\r\n\r\n".encode() + steps[1])
                        await writer.drain()
                        continue
                writer.write(
                    f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\n{more}transfer-encoding: chunked\r\n\r\n".encode()
                )
                for step in steps:
                    if isinstance(step, float):
                        await asyncio.sleep(step)
                    elif step == RESET:
                        sock = writer.get_extra_info("socket")
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                        writer.transport.abort()
                        return
                    elif step == CLOSE:
                        writer.close()
                        return
                    else:
                        assert isinstance(step, bytes)
                        writer.write(b"%x\r\n%s\r\n" % (len(step), step))
                        await writer.drain()
                        if writer.is_closing() or reader.at_eof():
                            self.disconnects += 1
                            return
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.disconnects += 1  # closed by the client in the middle of an answer
        except asyncio.CancelledError:
            pass
        finally:
            writer.close()
