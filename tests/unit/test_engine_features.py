"""Cache, speculative prefetch and alternatives in the engine, against FAKE servers."""

from __future__ import annotations

from typing import Any

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.ghost.engine import accepted_snapshot
from local_copilot.snapshot import Snapshot

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import infill_stream, llama
from .test_engine import snap, wait_until


async def test_cache_answers_a_repeated_spot_without_a_request(fake: Any) -> None:
    server = fake(llama(infill_stream(["ab"])))
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}, "speculative": False}))
    engine.ghost.submit(snap(1))
    await wait_until(lambda: any(p.final for p in editor.plans))
    infills = sum(1 for p, _ in server.requests if p == "/infill")
    engine.ghost.submit(snap(2))  # same text around the cursor (backspace + retype)
    await wait_until(lambda: sum(1 for p in editor.plans if p.final) == 2)
    last = editor.plans[-1]
    assert last.cached and last.text == "ab" and last.seq == 2
    assert sum(1 for p, _ in server.requests if p == "/infill") == infills
    assert engine.stats["cache_hits"] == 1


async def test_speculative_request_prefetches_the_next_suggestion(fake: Any) -> None:
    server = fake(llama(infill_stream(["ab"])))
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}}))
    s1 = snap(1)
    engine.ghost.submit(s1)
    await wait_until(lambda: sum(1 for p, _ in server.requests if p == "/infill") == 2)
    spec = [b for p, b in server.requests if p == "/infill"][1]
    assert spec["prompt"] == "x = ab"  # as if "ab" were already accepted
    await wait_until(lambda: engine.stats["speculative"] == 1 and len(engine.pipeline.cache._items) == 2)
    after = accepted_snapshot(s1, "ab")
    engine.ghost.submit(Snapshot(**{**{f: getattr(after, f) for f in after.__struct_fields__}, "tick": 9, "seq": 2}))
    await wait_until(lambda: any(p.seq == 2 for p in editor.plans))
    plan = [p for p in editor.plans if p.seq == 2][0]
    assert plan.cached and plan.final and plan.text == "ab"


async def test_alternatives_are_sampled_deduplicated_and_shown_together(fake: Any) -> None:
    answers = iter(["one", "two", "one", "three"])

    def script(path: str, body: dict) -> tuple[int, list]:
        if path == "/props":
            return llama([])(path, body)
        return 200, infill_stream([next(answers)])

    server = fake(script)
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}, "speculative": False}))
    s = snap(1)
    engine.ghost.submit(s)
    await wait_until(lambda: any(p.final for p in editor.plans))
    engine.ghost.alternatives(s)
    await wait_until(lambda: len(editor.plans[-1].items) > 1)
    plan = editor.plans[-1]
    assert [c.text for c in plan.items] == ["one", "two", "three"]
    temps = [b["temperature"] for p, b in server.requests if p == "/infill"]
    assert temps[0] == 0.1 and temps[1:] == [0.8, 0.8, 0.8]
    assert plan.items[1].words == [3]
