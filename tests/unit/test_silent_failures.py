"""Failures that used to say nothing (issue 38): an answer that is no completion stream, a
redirect, a server asking to wait (Retry-After), counts that did not add up. Against a FAKE
server (tests/fakes/fake_server.py) that switches to the fault mid-session."""

from __future__ import annotations

import asyncio
import email.utils
import time
from typing import Any

import pytest

from local_copilot.backends.base import MAX_RETRY_AFTER_S, retry_after
from local_copilot.cli.oneshot import complete_text
from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.errors import BackendError, ProtocolError
from local_copilot.health.report import Report, collect
from local_copilot.transport.streaming import NotAStream, SSEParser

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import QWEN_FIM, infill_stream, llama_props, sse
from .test_engine import snap, wait_until

GOOD = infill_stream(["ok", "ay"])
HTML = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Proxy login</body></html>\n"


class Switch:
    """A llama.cpp-shaped script whose completion answer the test switches mid-session."""

    def __init__(self) -> None:
        self.answer: tuple[Any, ...] = (200, GOOD)

    def __call__(self, path: str, body: dict[str, Any]) -> tuple[Any, ...]:
        if path == "/props":
            return 200, llama_props()
        status, steps, *headers = self.answer
        return (status, list(steps), *headers)


def completions(server: Any) -> int:
    return len([p for p, _ in server.requests if p in ("/infill", "/completion")])


async def healthy_first(fake: Any, script: Switch, **opts: Any) -> tuple[Any, Core, RecordingEditor]:
    server = fake(script)
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}, "speculative": False, **opts}))
    engine.ghost.submit(snap(1))
    await wait_until(lambda: editor.final == ["okay"])
    return server, engine, editor


@pytest.mark.parametrize("ctype", ["text/html; charset=utf-8", "text/event-stream"])
async def test_html_mid_session_is_one_message_and_counted_as_an_error(fake: Any, ctype: str) -> None:
    script = Switch()
    server, engine, editor = await healthy_first(fake, script)
    script.answer = (200, [HTML], {"content-type": ctype})  # a proxy's login page, from now on
    for seq in (2, 3, 4):
        engine.ghost.submit(snap(seq, "x = " + "abc"[: seq - 1]))
        await wait_until(lambda: engine.stats["errors"] >= seq - 1)
    assert len(editor.notes) == 1, editor.notes
    message = editor.notes[0][0]
    assert f"the server at {server.url} answered HTML, not a completion stream" in message, message
    assert engine.stats["errors"] == 3 and editor.states[-1] == "down"
    assert editor.final == ["okay"]  # nothing of the page was shown
    await engine.close()


async def test_plain_text_mid_session_says_it_is_not_a_completion_stream(fake: Any) -> None:
    script = Switch()
    _, engine, editor = await healthy_first(fake, script)
    script.answer = (200, [b"Service moved. Ask your administrator.\n"])
    engine.ghost.submit(snap(2, "x = a"))
    await wait_until(lambda: editor.notes)
    assert "answered text, not a completion stream" in editor.notes[0][0]
    assert engine.stats["errors"] == 1
    await engine.close()


async def test_html_in_a_whole_answer_says_html_not_a_malformed_chunk(fake: Any) -> None:
    # a server known to answer within a frame gets unstreamed requests (stream: false), whose
    # answer reads as one JSON document: a page there is not "a malformed chunk"
    fast = GOOD[:-1] + [sse({"content": "", "stop": True, "timings": {"predicted_n": 2, "predicted_ms": 0.5}})]
    script = Switch()
    script.answer = (200, fast)
    server = fake(script)
    server.fim_tokens = QWEN_FIM  # the client-rendered /completion path, where first parts are staged
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}, "speculative": False}))
    engine.ghost.submit(snap(1))
    await wait_until(lambda: editor.final == ["okay"])
    script.answer = (200, [HTML], {"content-type": "text/html"})
    engine.ghost.submit(snap(2, "x = a"))
    await wait_until(lambda: editor.notes)
    assert server.requests[-1][1]["stream"] is False  # the whole-answer path met the page
    assert "answered HTML, not a completion stream" in editor.notes[0][0], editor.notes
    await engine.close()


def test_the_event_stream_parser_refuses_lines_that_are_no_field() -> None:
    parser = SSEParser()
    assert parser.feed(b": ping\nevent: x\nid: 1\nretry: 5\ndata: {}\n\n") == [b"{}"]
    with pytest.raises(NotAStream):
        SSEParser().feed(b"<html>\n")
    with pytest.raises(ProtocolError, match="error in the stream: .*slot unavailable"):
        SSEParser().feed(b'error: {"message": "slot unavailable"}\n\n')


async def test_a_redirect_says_where_to_and_what_to_set(fake: Any) -> None:
    script = Switch()
    _, engine, editor = await healthy_first(fake, script)
    script.answer = (302, [b""], {"location": "https://llm.example.org/v2/infill"})
    engine.ghost.submit(snap(2, "x = a"))
    await wait_until(lambda: editor.notes)
    message = editor.notes[0][0]
    assert "redirected to https://llm.example.org/v2/infill (HTTP 302)" in message, message
    assert "set backends.llama.cpp.url to the final address" in message
    await engine.close()


async def test_a_relative_redirect_is_named_in_full(fake: Any) -> None:
    script = Switch()
    server, engine, editor = await healthy_first(fake, script)
    script.answer = (307, [b""], {"location": "/api/infill"})
    engine.ghost.submit(snap(2, "x = a"))
    await wait_until(lambda: editor.notes)
    assert f"redirected to {server.url}/api/infill" in editor.notes[0][0]
    await engine.close()


@pytest.mark.parametrize("status", [429, 503])
async def test_retry_after_holds_every_request_back_until_then(fake: Any, status: int) -> None:
    script = Switch()
    server, engine, editor = await healthy_first(fake, script)
    script.answer = (status, [b'{"error":{"message":"busy"}}'], {"retry-after": "2"})
    before = completions(server)
    engine.ghost.submit(snap(2, "x = a"))
    await wait_until(lambda: editor.notes)
    asked = time.time()
    assert completions(server) == before + 1
    assert "no requests to it until" in editor.notes[0][0] and "Retry-After" in editor.notes[0][0]
    script.answer = (200, GOOD)  # good again, but the server asked for 2 s
    for seq in range(3, 8):  # a key every 0.2 s while the wait lasts: none reaches the server
        engine.ghost.submit(snap(seq, "x = " + "a" * (seq - 1)))
        await asyncio.sleep(0.2)  # the typing pace (the thing under test): each key is a request when nothing holds it back
    assert completions(server) == before + 1
    assert set(editor.states[-5:]) == {"held"}
    assert engine.stats["errors"] == 1 and len(editor.notes) == 1  # the fault, counted and said once
    await asyncio.sleep(max(0.0, asked + 2.1 - time.time()))  # the thing under test: the 2 s the server asked for pass
    engine.ghost.submit(snap(9, "x = b"))  # the wait is over: requests go again
    await wait_until(lambda: editor.final[-1:] == ["okay"] and len(editor.final) == 2)
    assert completions(server) == before + 2
    await engine.close()


def test_retry_after_reads_seconds_and_http_dates_up_to_a_minute() -> None:
    now = time.time()
    assert retry_after("7") == 7.0
    assert retry_after("3600") == MAX_RETRY_AFTER_S == 60.0
    when = email.utils.formatdate(now + 10, usegmt=True)
    assert retry_after(when, now=now) == pytest.approx(10, abs=1)
    assert retry_after(email.utils.formatdate(now - 10, usegmt=True), now=now) is None  # past
    assert retry_after("0") is None and retry_after("") is None and retry_after("later") is None
    assert retry_after("nan") is None and retry_after("-5") is None


async def test_failed_tries_count_as_requests_and_health_adds_them_up() -> None:
    # the server is down from the start: each try fails probing it, before a completion request
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": "http://127.0.0.1:9"}}}))
    for i in range(3):
        engine.ghost.submit(snap(i + 1))
        await wait_until(lambda: engine.stats["errors"] >= i + 1)
    assert engine.stats["errors"] == 3 and engine.stats["requests"] == 3
    report: Report = await collect({"backends": {"llama.cpp": {"url": "http://127.0.0.1:9"}}},
                                   stats=engine.stats.summary(), quick_timeout=0.2)
    lines = [i.message for s in report.sections for i in s.items if "requests failed" in i.message]
    assert lines == ["3 of 3 requests failed since the host started"], lines
    await engine.close()


def test_the_cli_says_the_server_asked_to_wait_at_once(fake: Any) -> None:
    # `local-copilot complete`: the warm-up meets the 429, the request is held back: the
    # answer is the server's wait, not a timeout 25 s later
    script = Switch()
    script.answer = (429, [b'{"error":{"message":"slow down"}}'], {"retry-after": "30"})
    server = fake(script)
    started = time.monotonic()
    with pytest.raises(BackendError) as err:
        complete_text({"backends": {"llama.cpp": {"url": server.url}}}, "x = ")
    assert time.monotonic() - started < 5
    assert "waiting for the server until" in str(err.value) and "Retry-After" in str(err.value), str(err.value)


async def test_an_unexpected_error_while_probing_the_server_is_said_and_counted(fake: Any) -> None:
    # it ended the request's task, whose exception nobody reads: no message, no count, no log
    server = fake(Switch())
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}, "speculative": False}))

    async def broken() -> int:
        raise RuntimeError("a bug in a probe")

    assert engine.backend is not None
    engine.backend.context_limit = broken  # type: ignore[method-assign]
    engine.ghost.submit(snap(1))
    await wait_until(lambda: editor.notes)
    assert editor.notes == [("local-copilot: internal error, see the log (:LocalCopilot log)", "error")]
    assert engine.stats["errors"] == 1
    await engine.close()
