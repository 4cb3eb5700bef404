"""The llama.cpp backend against the real llama-server: request shape, streaming, cancel."""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

import httpx
import pytest

from local_copilot.backends import FimRequest, LlamaCppBackend
from local_copilot.config import load_config

from ..helpers import tcp_sockets

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


def connections_to(port: int) -> dict[int, str]:
    """This process's TCP connections to `port` on loopback, as the kernel lists them:
    local port -> state ("ESTABLISHED", or "CLOSE_WAIT" once the server has closed its end)."""
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            mine.add(target[8:-1])
    states = {"01": "ESTABLISHED", "08": "CLOSE_WAIT"}
    return {s.local_port: states[s.state] for s in tcp_sockets()
            if s.inode in mine and s.remote_port == port and s.state in states}


async def test_an_unstreamed_answer_is_one_chunk_and_keeps_the_connection(llama_server: Any) -> None:
    port = int(llama_server.url.rsplit(":", 1)[1])
    async with httpx.AsyncClient() as client:
        b = backend(llama_server.url, client)
        await b.ensure_ready()  # its probes go through httpx's own connections
        probes = connections_to(port)
        req = FimRequest(prefix="def f():\n", middle="    return ", suffix="\n", n_predict=5, stream=False)
        chunks = [c async for c in b.complete(req)]
        assert [(c.text, c.done) for c in chunks] == [("xxxxx", True)]
        assert chunks[0].timings and chunks[0].timings["predicted_n"] == 5 and chunks[0].timings["predicted_ms"] > 0
        kept = {p: s for p, s in connections_to(port).items() if p not in probes}
        assert list(kept.values()) == ["ESTABLISHED"]  # llama-server keeps an unstreamed answer's connection...
        chunks = [c async for c in b.complete(req)]
        assert chunks[0].text == "xxxxx"
        assert {p: s for p, s in connections_to(port).items() if p not in probes} == kept  # ...and it is used again
        # ...and closes a streamed one's: the next request goes over a new connection
        [c async for c in b.complete(FimRequest(prefix="a\n", middle="b", suffix="", n_predict=3))]
        chunks = [c async for c in b.complete(req)]
        assert chunks[0].text == "xxxxx"
        now = {p: s for p, s in connections_to(port).items() if p not in probes and s == "ESTABLISHED"}
        assert len(now) == 1 and not set(now) & set(kept), (kept, now)
