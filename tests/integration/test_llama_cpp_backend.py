"""The llama.cpp backend against the real llama-server: request shape, streaming, cancel."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest

from local_copilot.backends import FimRequest, LlamaCppBackend
from local_copilot.config import load_config

pytestmark = pytest.mark.integration


def metric(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    m = re.search(rf"^llamacpp:{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
    assert m, f"{name} not in /metrics"
    return float(m.group(1))


def backend(url: str, client: httpx.AsyncClient) -> LlamaCppBackend:
    cfg = load_config({"backends": {"llama.cpp": {"url": url}}}).active
    return LlamaCppBackend("llama.cpp", cfg, client)


async def test_streams_tokens_and_ends_with_timings(llama_server: Any) -> None:
    async with httpx.AsyncClient() as client:
        b = backend(llama_server.url, client)
        req = FimRequest(prefix="def f():\n", middle="    return ", suffix="\n", n_predict=5)
        chunks = [c async for c in b.complete(req)]
    assert "".join(c.text for c in chunks) == "xxxxx"
    # one event per token: streamed, not one blob (the events of one network read come
    # merged into one chunk that keeps their texts apart)
    assert sum(len(c.parts) or 1 for c in chunks if c.text) >= 5
    assert chunks[-1].done and chunks[-1].timings and chunks[-1].timings["predicted_n"] == 5


async def test_closing_the_stream_stops_generation_on_the_server(llama_server: Any) -> None:
    url = llama_server.url
    before = metric(url, "tokens_predicted_total")
    async with httpx.AsyncClient() as client:
        b = backend(url, client)
        # ~3000 tokens take over a second on the tiny model: long enough to cancel in the middle
        req = FimRequest(prefix="a\n", middle="b", suffix="", n_predict=3000)
        stream = b.complete(req)
        got = 0
        async for chunk in stream:
            got += len(chunk.text)
            if got >= 10:
                break
        await stream.aclose()  # type: ignore[attr-defined]

        async def idle() -> bool:
            return metric(url, "requests_processing") == 0

        for _ in range(200):
            if await idle():
                break
            await asyncio.sleep(0.02)
        assert await idle()
    generated = metric(url, "tokens_predicted_total") - before
    # the server stopped long before n_predict: the stream close cancelled the slot
    print("generated after cancel:", generated)
    assert 10 <= generated < 1500, generated


async def test_an_unstreamed_answer_is_one_chunk_and_keeps_the_connection(llama_server: Any) -> None:
    async with httpx.AsyncClient() as client:
        b = backend(llama_server.url, client)
        req = FimRequest(prefix="def f():\n", middle="    return ", suffix="\n", n_predict=5, stream=False)
        chunks = [c async for c in b.complete(req)]
        assert [(c.text, c.done) for c in chunks] == [("xxxxx", True)]
        assert chunks[0].timings and chunks[0].timings["predicted_n"] == 5 and chunks[0].timings["predicted_ms"] > 0
        kept = [c for conns in b.streams._idle.values() for c in conns]
        assert len(kept) == 1  # llama-server keeps an unstreamed answer's connection...
        chunks = [c async for c in b.complete(req)]
        assert chunks[0].text == "xxxxx" and [c for conns in b.streams._idle.values() for c in conns] == kept
        # ...and closes a streamed one's: the next request would connect again
        [c async for c in b.complete(FimRequest(prefix="a\n", middle="b", suffix="", n_predict=3))]
        # (asked as after a pause, when reusable() peeks whether the server closed it)
        assert all(not c.reusable(idle_s=60.0) for conns in b.streams._idle.values() for c in conns)
