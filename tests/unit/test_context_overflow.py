"""A server that refuses a prompt as longer than its context ("exceeds the available context
size", HTTP 400), against a FAKE llama.cpp server (a real one refuses only what the plugin
sends too long, which the plugin no longer does: tests/integration/test_long_lines.py): the
request is fitted again to the context the refusal names, and a refusal the second fit still
meets is a message saying so, never the status 'backend down'."""

from __future__ import annotations

import json
from typing import Any

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.errors import ServerError
from local_copilot.snapshot import Snapshot

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import Step, infill_stream, llama_props
from .test_engine import wait_until


def _refusal(size: int, n_ctx: int) -> list[Step]:
    # llama-server's own body for it (tools/server/server-common.cpp, exceed_context_size_error)
    return [json.dumps({"error": {
        "code": 400, "message": f"request ({size} tokens) exceeds the available context size ({n_ctx} tokens), "
        "try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": size, "n_ctx": n_ctx}}).encode()]


def _engine(url: str) -> tuple[Core, RecordingEditor]:
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": url, "fim_template": "qwen"}}, "speculative": False,
                                  "latency_target_ms": 600_000}))
    return engine, editor


LINES = [f"line_{i:04d} = {i}" for i in range(400)]  # ~6 KB above the cursor


async def test_a_server_that_does_not_say_its_context_is_fitted_to_what_its_refusal_says(fake: Any) -> None:
    calls: list[int] = []

    def script(path: str, body: dict[str, Any]) -> tuple[int, list[Step]]:
        if path == "/props":
            return 200, llama_props(n_ctx=0)  # (no context said: the budget is not known)
        calls.append(len(body["prompt"]))
        if len(body["prompt"]) > 1000:
            return 400, _refusal(len(body["prompt"]), 1024)
        return 200, infill_stream(["ok"])

    engine, editor = _engine(fake(script).url)
    try:
        engine.ghost.submit(Snapshot(buf=1, tick=1, row=399, col=len(LINES[-1]), first=0, lines=LINES, seq=1))
        await wait_until(lambda: any(p.final for p in editor.plans))
        assert len(calls) == 2 and calls[0] > 1000 >= calls[1]
        assert editor.plans[-1].text == "ok" and not editor.notes and "down" not in editor.states
    finally:
        await engine.close()


async def test_a_refusal_after_the_second_fit_is_a_message_and_never_backend_down(fake: Any) -> None:
    def script(path: str, body: dict[str, Any]) -> tuple[int, list[Step]]:
        if path == "/props":
            return 200, llama_props(n_ctx=4096)
        return 400, _refusal(5000, 4096)  # a server whose context holds less than it says

    engine, editor = _engine(fake(script).url)
    try:
        engine.ghost.submit(Snapshot(buf=1, tick=1, row=399, col=len(LINES[-1]), first=0, lines=LINES, seq=1))
        await wait_until(lambda: bool(editor.notes))
        assert "down" not in editor.states, editor.states
        (message, _), = editor.notes
        assert message.startswith("local-copilot: the prompt was too long for the server's context")
        assert "next requests are cut shorter" in message
    finally:
        await engine.close()


def test_the_refusals_context_size_is_read_from_llama_cpp_and_openai_style_errors() -> None:
    assert ServerError("x: HTTP 400: ...", status=400, context_tokens=4096).context_tokens == 4096
    from local_copilot.backends.base import _context_tokens

    assert _context_tokens({"n_ctx": 2048}, "") == 2048
    assert _context_tokens(None, "This model's maximum context length is 2048 tokens. However, you requested 3000") == 2048
    assert _context_tokens({}, "request (150071 tokens) exceeds the available context size (4096 tokens)") == 4096
    assert _context_tokens({}, "bad request") is None
