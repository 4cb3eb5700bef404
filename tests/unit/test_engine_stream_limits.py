"""Two limits on one stream, against the FAKE server (exact timing):

* partial suggestions are drawn at most once per frame (Engine.PARTIAL_FRAME_S), the first at
  once and the last text always, so a server streaming ~1,000 tokens/s does not cost Neovim a
  draw per token (bench/run.py);
* a stream that goes on past n_predict chunks is cut by the plugin, the text so far becomes the
  suggestion, and the connection is closed (tests/integration/test_faults.py, endless stream).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from local_copilot.config import load_config
from local_copilot.core import Core

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import Step, infill_stream, llama_props, sse
from .test_engine import snap, wait_until


async def test_partial_plans_are_limited_to_one_per_frame(fake: Any) -> None:
    tokens = ["t"] * 100  # 100 tokens, 2 ms apart: ~200 ms of stream
    server = fake(lambda path, body: (200, llama_props()) if path == "/props" else (200, infill_stream(tokens, delay=0.002)))
    editor = RecordingEditor()
    engine = Core(editor)
    # one request of n_predict (the fake ignores n_predict; staged requests have their own test)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}, "speculative": False,
                                  "n_predict_first": 0}))
    engine.ghost.submit(snap(1))
    await wait_until(lambda: any(p.final for p in editor.plans))
    partial = [p for p in editor.plans if not p.final]
    assert partial and partial[0].text == "t"  # the first text at once
    assert editor.plans[-1].final and editor.plans[-1].text == "t" * 100
    # ~200 ms at one per 16 ms frame: about 13; generous for a noisy machine, far below 100
    assert len(partial) <= 40, len(partial)
    texts = [p.text for p in partial]
    assert texts == sorted(texts, key=len)  # never goes back
    await engine.close()


def endless() -> Iterator[Step]:
    while True:
        yield sse({"content": "z", "stop": False})
        yield 0.001


async def test_a_stream_past_n_predict_is_cut_and_its_text_kept(fake: Any) -> None:
    server = fake(lambda path, body: (200, llama_props()) if path == "/props" else (200, endless()))
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}, "speculative": False,
                                  "n_predict": 20, "n_predict_first": 0}))
    engine.ghost.submit(snap(1))
    await wait_until(lambda: any(p.final for p in editor.plans))
    final = editor.plans[-1].text
    assert set(final) == {"z"} and 20 <= len(final) <= 20 + 16, final
    await wait_until(lambda: server.disconnects >= 1)  # the endless stream was closed
    assert not editor.notes
    await engine.close()


async def test_alternatives_from_a_server_that_ignores_max_tokens_are_cut(fake: Any) -> None:
    """next()/prev() on an OpenAI-compatible server asks for n candidates in one stream; one
    that never ends is cut like any other (it held the request open until the user typed)."""
    def forever() -> Iterator[Step]:
        while True:
            for i in range(3):
                yield sse({"choices": [{"index": i, "text": "abc"[i], "finish_reason": None}]})
            yield 0.001

    def script(path: str, body: dict) -> tuple[int, Any]:
        if path == "/v1/models":
            return 200, [json.dumps({"object": "list", "data": [{"id": "m", "owned_by": "vllm"}]}).encode()]
        if path == "/tokenize":
            return 200, [json.dumps({"tokens": [1000 + len(body["prompt"])]}).encode()]
        if path == "/metrics":
            return 404, [b"not found"]
        return 200, forever()

    server = fake(script)
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backend": "openai", "speculative": False, "n_predict": 20,
                                  "backends": {"openai": {"url": server.url, "fim_template": "qwen"}}}))
    engine.ghost.alternatives(snap(1))
    await wait_until(lambda: any(p.final for p in editor.plans))
    texts = [c.text for c in editor.plans[-1].items]
    assert set(texts) == {"a" * len(texts[0]), "b" * len(texts[1]), "c" * len(texts[2])}, texts
    assert all(20 <= len(t) <= 20 + 16 for t in texts), texts
    await wait_until(lambda: server.disconnects >= 1)  # the stream was closed
    assert not editor.notes
    await engine.close()
