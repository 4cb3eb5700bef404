"""Whether a port that did not finish a TLS handshake speaks plain http instead.

An `https://` url at a plain-http server fails one of two ways: a server that answers the TLS
hello with an HTTP error (Python's http.server) fails the handshake at once (OpenSSL's
WRONG_VERSION_NUMBER, read in access.py), and one that reads the hello as the start of a
request and waits for the rest (llama-server) lets the handshake time out, which reads as a
server that is not there. So when a handshake times out or fails on anything but the
certificate, the same port is asked for `/` in plain http, once and within PROBE_S: a status
line back means the url's scheme is what is wrong, and the failure carries AnswersPlainHttp
as its cause for access.tls_failure to say so. The probe sends nothing of the user's.
"""

from __future__ import annotations

import asyncio
import ssl

import httpx

__all__ = ["PROBE_S", "AnswersPlainHttp", "PlainHttpCheck", "answers_plain_http", "probe_worth"]

PROBE_S = 1.0  # a server on the port answers a plain request at once: this only bounds a dead one


class AnswersPlainHttp(Exception):
    """The cause of a failed TLS connection to a port that answers plain http."""


async def answers_plain_http(host: str, port: int, timeout_s: float = PROBE_S) -> bool:
    """Whether `host`:`port` answers a plain-http request with an HTTP status line."""
    name = f"[{host}]" if ":" in host else host
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(f"GET / HTTP/1.0\r\nHost: {name}:{port}\r\nConnection: close\r\n\r\n".encode())
                await writer.drain()
                head = await reader.readexactly(5)
            finally:
                writer.close()
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return False
    return head == b"HTTP/"


def probe_worth(exc: BaseException) -> bool:
    """Whether a failed TLS connection may be a plain-http server: not when its certificate
    was checked (the server speaks TLS) or OpenSSL already saw plain text."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLCertVerificationError | AnswersPlainHttp):
            return False
        if isinstance(cause, ssl.SSLError) and "WRONG_VERSION_NUMBER" in str(cause):
            return False
        cause = cause.__cause__ or cause.__context__
    return True


class PlainHttpCheck(httpx.AsyncBaseTransport):
    """An httpx transport whose https connections that fail (a handshake that times out or
    breaks off) are followed by the plain-http probe: when the port answers it, the failure
    is a ConnectError caused by AnswersPlainHttp."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await self._inner.handle_async_request(request)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            url = request.url
            if url.scheme != "https" or not probe_worth(exc) or not await answers_plain_http(url.host, url.port or 443):
                raise
            raise httpx.ConnectError(f"{url.host}:{url.port or 443} answers plain http, not TLS",
                                     request=request) from AnswersPlainHttp()

    async def aclose(self) -> None:
        await self._inner.aclose()
