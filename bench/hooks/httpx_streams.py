"""Completion streams through httpx (AsyncClient on kept connections) with the interface and
the exceptions of the hand-written client (local_copilot/transport/http_stream.py), for `make
bench`'s `httpx` profile, which measures the two side by side (sitecustomize.py puts it in
the host)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType

import httpx

__all__ = ["HttpxStreams"]


class _Response:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.headers = {k.lower(): v for k, v in response.headers.items()}

    def read_now(self) -> bytes | None:
        return None

    async def iter_raw(self) -> AsyncIterator[bytes]:
        async for piece in self._response.aiter_raw():
            yield piece

    async def __aenter__(self) -> _Response:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._response.aclose()


class HttpxStreams:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def post(self, url: str, body: bytes, headers: dict[str, str], *, wait_s: float = 0.0) -> _Response:
        request = self.client.build_request("POST", url, content=body,
                                            headers={"content-type": "application/json", **headers})
        return _Response(await self.client.send(request, stream=True))

    def post_now(self, url: str, body: bytes, headers: dict[str, str], wait_s: float, *,
                 whole: bool = False) -> None:
        """httpx cannot send without the event loop: nothing is sent here (the exchange then
        sends through post())."""
        return None

    def close(self) -> None:
        pass
