"""Limits on what a server's answer may make the plugin hold, show or insert.

A hostile or broken server (any local user can listen on a loopback port; a remote one can
be compromised) must not exhaust the host's memory, flood Neovim's message area, or write
terminal escapes or bidirectional overrides into a buffer. Documented in :help
local-copilot-limits.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx

from ..errors import ProtocolError
from .owner import check_peer

__all__ = [
    "MAX_ERROR_BODY_BYTES",
    "MAX_EVENT_BYTES",
    "MAX_NOTIFY_CHARS",
    "MAX_PROBE_BYTES",
    "MAX_SERVER_MESSAGE_CHARS",
    "MAX_STREAM_BYTES",
    "MAX_SUGGESTION_CHARS",
    "MAX_ANSWER_BYTES",
    "CappedTransport",
    "clip_message",
    "read_error_body",
    "unsafe_char",
]

# one stream event (a line, or all the `data:` lines of one event together)
MAX_EVENT_BYTES = 4 * 1024 * 1024
# all the bytes of one completion stream
MAX_STREAM_BYTES = 16 * 1024 * 1024
# a whole unstreamed completion answer (one JSON document)
MAX_ANSWER_BYTES = 1024 * 1024
# the body of an error answer (its message goes to the log and a notification)
MAX_ERROR_BODY_BYTES = 64 * 1024
# the answer to a probe (/props, /v1/models, /api/tags, /tokenize ...)
MAX_PROBE_BYTES = 4 * 1024 * 1024
# one suggestion's text, in characters: more is no completion (n_predict tokens are a few KB)
MAX_SUGGESTION_CHARS = 64 * 1024
# one notification shown by Neovim, and a server's own error message within it
MAX_NOTIFY_CHARS = 200
MAX_SERVER_MESSAGE_CHARS = 120

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional embeddings,
# overrides and isolates (U+202A-202E, U+2066-2069) that make text read other than it runs
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def unsafe_char(text: str) -> str | None:
    """The first character of `text` that must never be shown or inserted, or None."""
    m = _UNSAFE.search(text)
    return m.group() if m else None


def clip_message(message: str, limit: int = MAX_NOTIFY_CHARS) -> str:
    """A message fit to show: unsafe characters as `\\uXXXX`, at most `limit` characters."""
    message = _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", message)
    if len(message) > limit:
        message = message[: limit - 1] + "…"
    return message


def server_words(error: Any) -> str:
    """A server's own error text fit to show, from the `error` value of its answer or stream:
    the object's `message` ({"code": 500, "message": "...", "type": ...}), else the text.

    >>> server_words({"code": 500, "message": "slot unavailable", "type": "server_error"})
    'slot unavailable'
    """
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        error = error["message"]
    return clip_message(error if isinstance(error, str) else str(error), MAX_SERVER_MESSAGE_CHARS)


async def read_error_body(response: Any) -> bytes:
    """At most MAX_ERROR_BODY_BYTES of an error answer (a StreamResponse or an httpx one);
    the rest is not read (the connection is closed rather than kept)."""
    if isinstance(response, httpx.Response):
        if hasattr(response, "_content"):  # read already (a probe: CappedTransport bounded it)
            return response.content[:MAX_ERROR_BODY_BYTES]
        chunks: AsyncIterator[bytes] = response.aiter_raw()
    else:
        chunks = response.iter_raw()
    body = bytearray()
    async for piece in chunks:
        body += piece
        if len(body) >= MAX_ERROR_BODY_BYTES:
            break
    return bytes(body[:MAX_ERROR_BODY_BYTES])


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, url: str) -> None:
        self._inner = inner
        self._url = url

    async def __aiter__(self) -> AsyncIterator[bytes]:
        n = 0
        async for piece in self._inner:
            n += len(piece)
            if n > MAX_PROBE_BYTES:
                raise ProtocolError(f"{self._url} answered more than {MAX_PROBE_BYTES // (1024 * 1024)} MB")
            yield piece

    async def aclose(self) -> None:
        await self._inner.aclose()


class CappedTransport(httpx.AsyncBaseTransport):
    """An httpx transport whose answers may hold at most MAX_PROBE_BYTES (probes, health)."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self._inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        # probes carry no buffer text, but the server they reach gets the requests next
        check_peer(request.url.host, request.url.port or (443 if request.url.scheme == "https" else 80))
        response = await self._inner.handle_async_request(request)
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        response.stream = _CappedStream(stream, str(request.url.copy_with(query=None)))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
