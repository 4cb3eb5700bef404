"""Warm-ups against a FAKE llama.cpp server (exact timing): the prompt of the place the cursor
rests at, sent with n_predict 0 and counted; a newer place or a request elsewhere cancels it,
a request at that place does not; backends that cannot evaluate without generating get none."""

from __future__ import annotations

import json
from typing import Any

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.snapshot import Snapshot

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import Step, infill_stream, llama_props
from .test_engine import wait_until

LINES = [f"value_{i} = {i}" for i in range(100)]


def at(row: int, seq: int) -> Snapshot:
    return Snapshot(buf=1, tick=seq, row=row, col=0, first=0, lines=LINES, seq=seq)


def slow_warm(delay: float):
    def script(path: str, body: dict[str, Any]) -> tuple[int, list[Step]]:
        if path == "/props":
            return 200, llama_props()
        if body.get("n_predict") == 0:
            return 200, [delay, b"data: " + json.dumps({"content": "", "stop": True, "timings": {
                "prompt_n": 300, "prompt_ms": 1500.0, "predicted_n": 1, "predicted_ms": 0.01}}).encode() + b"\n\n"]
        return 200, infill_stream(["ok"])

    return script


def completions(server: Any) -> list[dict[str, Any]]:
    return [b for p, b in server.requests if p == "/completion"]


async def test_a_warm_up_evaluates_the_places_prompt_generates_nothing_and_is_counted(fake: Any) -> None:
    server = fake(slow_warm(0.0))
    engine = Core(RecordingEditor())
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url, "fim_template": "qwen"}}}))
    engine.ghost.warm(at(50, 1))
    await wait_until(lambda: engine.stats.counters["warmups"] == 1 and not engine.buffers[1].warming())
    [body] = completions(server)
    assert body["n_predict"] == 0 and body["stream"] is False
    assert "value_49 = 49\n<|fim_suffix|>" in body["prompt"]  # the place's own prompt
    assert engine.prompts.speed.prompt_tps == 200  # its timings measure the server
    await engine.close()


async def test_a_newer_place_cancels_a_warm_up_a_request_at_the_place_does_not(fake: Any) -> None:
    server = fake(slow_warm(0.5))
    engine = Core(RecordingEditor())
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url, "fim_template": "qwen"}},
                                  "speculative": False}))
    engine.ghost.warm(at(50, 1))
    await wait_until(lambda: len(completions(server)) == 1)
    first = engine.buffers[1].warm
    engine.ghost.warm(at(80, 2))  # the cursor rests somewhere else now
    await wait_until(lambda: first is not None and first.done())
    assert first is not None and first.cancelled()
    await wait_until(lambda: len(completions(server)) == 2)
    second = engine.buffers[1].warm
    engine.ghost.submit(at(81, 3))  # `o` on the warmed line: the warm-up is that request's prompt
    assert second is not None and not second.done()
    engine.ghost.submit(at(10, 4))  # a request far away: the warm-up is of no use to it
    await wait_until(lambda: second.done())
    assert second.cancelled()
    await engine.close()


async def test_no_warm_up_where_the_backend_cannot_generate_nothing(fake: Any) -> None:
    server = fake(slow_warm(0.0))
    engine = Core(RecordingEditor())
    engine.configure(load_config({"backend": "openai", "backends": {"openai": {"url": server.url}}}))
    engine.ghost.warm(at(50, 1))
    assert not server.requests and engine.stats.counters["warmups"] == 0
    await engine.close()
