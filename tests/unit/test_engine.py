"""The request lifecycle against a FAKE server (exact timing, disconnect detection)."""

from __future__ import annotations

import asyncio
from typing import Any

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.snapshot import Snapshot

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import infill_stream, llama


def snap(seq: int, line: str = "x = ", buf: int = 1) -> Snapshot:
    return Snapshot(buf=buf, tick=seq, row=0, col=len(line.encode()), first=0, lines=[line, "y = 2"], seq=seq)


async def wait_until(pred: Any, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        assert loop.time() < end, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_streamed_tokens_are_shown_before_the_stream_ends(fake: Any) -> None:
    server = fake(llama(infill_stream(["a", "b", "c"], delay=0.15)))
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}}))
    engine.ghost.submit(snap(1))
    await wait_until(lambda: any(p.final for p in editor.plans))
    texts = [p.text for p in editor.plans]
    assert texts[0] == "a" and texts[-1] == "abc"
    assert [p.final for p in editor.plans][-1] is True and not editor.plans[0].final
    path, body = [r for r in server.requests if r[0] == "/infill"][0]
    assert path == "/infill"
    assert body["input_prefix"] == "" and body["prompt"] == "x = " and body["input_suffix"] == "\ny = 2"
    assert body["stream"] is True and body["cache_prompt"] is True
    # /infill cannot continue a text: one request of n_predict (no first part)
    assert body["n_predict"] == 128 and body["t_max_predict_ms"] == 500
    await engine.close()


async def test_a_newer_snapshot_cancels_the_older_stream(fake: Any) -> None:
    server = fake(llama(infill_stream(["z"] * 200, delay=0.02)))
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}}))
    engine.ghost.submit(snap(1))
    await wait_until(lambda: editor.plans)
    first = engine.buffers[snap(1).buf].task
    assert first is not None
    engine.ghost.submit(snap(2, "x = 1"))
    await wait_until(lambda: server.disconnects >= 1 and first.done())  # the stream closed, its task wound down
    # nothing more arrives for the cancelled request
    count = sum(1 for p in editor.plans if p.seq == 1)
    await asyncio.sleep(0.2)  # the thing under test: a while in which seq 1's stream would have gone on
    assert sum(1 for p in editor.plans if p.seq == 1) == count
    assert engine.stats["cancels"] == 1
    await engine.close()


async def test_server_down_gives_one_notification_per_episode() -> None:
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": "http://127.0.0.1:9"}}}))
    for i in range(3):
        engine.ghost.submit(snap(i + 1))
        await wait_until(lambda: engine.stats["errors"] >= i + 1)
    assert len(editor.notes) == 1
    message, level = editor.notes[0]
    assert "cannot reach http://127.0.0.1:9" in message and level == "warn"
    assert "Traceback" not in message
    assert editor.plans == []
    assert editor.states == ["down", "down", "down"]  # status() says 'backend down'
    await engine.close()


async def test_http_error_message_comes_from_the_server(fake: Any) -> None:
    body = b'{"error":{"code":501,"message":"Infill is not supported by this model","type":"not_supported_error"}}'
    server = fake(lambda path, b: (200, [b'{"default_generation_settings":{"n_ctx":4096}}']) if path == "/props" else (501, [body]))
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}}))
    engine.ghost.submit(snap(1))
    await wait_until(lambda: editor.notes)
    assert "HTTP 501: Infill is not supported by this model" in editor.notes[0][0]
    await engine.close()


async def test_a_stream_broken_half_way_takes_its_partial_text_back(fake: Any) -> None:
    # the bad chunk comes a read later, after the good text was drawn
    steps = infill_stream(["a", "b"])[:2] + [0.1, b"data: {not json}\n\n"]
    server = fake(llama(steps))
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}}))
    engine.ghost.submit(snap(1))
    await wait_until(lambda: editor.notes)
    await wait_until(lambda: any(p.final for p in editor.plans))
    assert any(p.text for p in editor.plans if not p.final)  # something was on screen
    assert [p.text for p in editor.plans if p.final] == [""]  # and is gone: nothing to accept
    assert "malformed stream chunk" in editor.notes[0][0]
    await engine.close()


async def test_keys_while_the_server_has_not_answered_queue_one_request_not_one_per_key(fake: Any) -> None:
    # llama-server notices a closed connection in its queue only once a second, so a request
    # cancelled before its answer starts still costs its prompt evaluation: newer snapshots
    # wait for the answer to start, then only the newest is sent
    server = fake(llama(infill_stream(["ok"])))
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}, "speculative": False}))
    engine.ghost.submit(snap(0, "y"))  # the server's /props is known after this one
    await wait_until(lambda: any(p.final for p in editor.plans))
    server.requests.clear()
    server.first_byte_delay = 0.3
    line = "x = "
    for seq in range(1, 7):
        line += "a"
        engine.ghost.submit(snap(seq, line))
        await asyncio.sleep(0.02)  # the typing pace (the thing under test): keys faster than the server answers
    await wait_until(lambda: any(p.final and p.seq == 6 for p in editor.plans))
    sent = [b["prompt"] for p, b in server.requests if p == "/infill"]
    assert sent == ["x = a", "x = aaaaaa"], sent  # the first, then straight to the newest
    assert editor.plans[-1].text == "ok" and not any(p.final and 1 <= p.seq < 6 for p in editor.plans)
    assert engine.stats.counters["deferred"] == 5
    await engine.close()
