"""Limits on a hostile server's answers (python/local_copilot/transport/limits.py), against a FAKE
server that sends what no real server does."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from local_copilot.errors import ProtocolError
from local_copilot.pipeline.postprocess import process
from local_copilot.transport.limits import (
    MAX_ERROR_BODY_BYTES,
    MAX_NOTIFY_CHARS,
    MAX_PROBE_BYTES,
    CappedTransport,
    clip_message,
    read_error_body,
    unsafe_char,
)

from .test_postprocess import ctx


@pytest.mark.parametrize("char", ["\x1b", "\r", "\x00", "\x07", "\x7f", "\x9b", "\u202a", "\u202e", "\u2066", "\u2069"])
def test_unsafe_characters(char: str) -> None:
    assert unsafe_char(f"ok{char}x") == char
    assert process(f"ok{char}x", ctx(""), final=True).text == ""


def test_tab_newline_and_crlf_are_fine() -> None:
    assert unsafe_char("a\tb\nc") is None
    assert process("a\tb\r\nc", ctx(""), final=True).text == "a\tb\nc"


def test_clip_message_escapes_and_bounds() -> None:
    clipped = clip_message("\x1b[2J" + "boom " * 1000)
    assert len(clipped) == MAX_NOTIFY_CHARS and "\x1b" not in clipped and clipped.startswith("\\u001b[2J")


async def test_an_error_body_is_read_up_to_its_cap(fake: Any) -> None:
    server = fake(lambda path, body: (500, [b"x" * (1 << 20)] * 8))
    async with httpx.AsyncClient() as client, client.stream("POST", server.url + "/infill", json={}) as response:
        body = await read_error_body(response)
    assert len(body) == MAX_ERROR_BODY_BYTES


async def test_a_probe_answer_past_its_cap_is_refused(fake: Any) -> None:
    server = fake(lambda path, body: (200, [b"x" * (1 << 20)] * (MAX_PROBE_BYTES // (1 << 20) + 2)))
    async with httpx.AsyncClient(transport=CappedTransport()) as client:
        with pytest.raises(ProtocolError, match="answered more than"):
            await client.get(server.url + "/props")
