from __future__ import annotations

import pytest

from local_copilot.errors import StreamLineTooLong
from local_copilot.transport.streaming import (
    MAX_EVENT_BYTES,
    MAX_STREAM_BYTES,
    NDJSONParser,
    SSEParser,
)

STREAM = (
    b'data: {"content":"a\xc3\xa9"}\n\n'
    b": ping\n\n"
    b'data: {"content":"b"}\r\n\r\n'
    b'data: {"content":"","stop":true}\n\n'
)


@pytest.mark.parametrize("size", [1, 2, 3, 7, len(STREAM)])
def test_sse_tolerates_any_chunk_boundary(size: int) -> None:
    parser = SSEParser()
    out: list[bytes] = []
    for i in range(0, len(STREAM), size):
        out += parser.feed(STREAM[i : i + size])
    out += parser.close()
    assert out == [b'{"content":"a\xc3\xa9"}', b'{"content":"b"}', b'{"content":"","stop":true}']


def test_sse_last_event_without_blank_line_counts_at_close() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: [DONE]") == []
    assert parser.close() == [b"[DONE]"]


def test_sse_refuses_an_endless_line() -> None:
    parser = SSEParser()
    with pytest.raises(ValueError):
        for _ in range(MAX_EVENT_BYTES // 65536 + 2):
            parser.feed(b"x" * 65536)


def test_sse_refuses_one_event_of_endless_data_lines() -> None:
    # each line is short; together they are one event, once buffered without limit
    parser = SSEParser()
    with pytest.raises(StreamLineTooLong, match="stream event longer than"):
        for _ in range(MAX_EVENT_BYTES // 65536 + 2):
            assert parser.feed(b"data: " + b"y" * 65536 + b"\n") == []


def test_sse_refuses_a_stream_past_its_byte_cap() -> None:
    parser = SSEParser()
    event = b"data: " + b"y" * (1 << 20) + b"\n\n"
    with pytest.raises(StreamLineTooLong, match="in one stream"):
        for _ in range(MAX_STREAM_BYTES // len(event) + 2):
            assert len(parser.feed(event)) == 1


def test_ndjson_refuses_a_stream_past_its_byte_cap() -> None:
    parser = NDJSONParser()
    with pytest.raises(StreamLineTooLong):
        for _ in range(MAX_STREAM_BYTES // (1 << 20) + 2):
            parser.feed(b"{}" + b" " * (1 << 20) + b"\n")


def test_ndjson_splits_lines_across_chunks() -> None:
    parser = NDJSONParser()
    assert parser.feed(b'{"response":"a"}\n{"resp') == [b'{"response":"a"}']
    assert parser.feed(b'onse":"b","done":true}\n') == [b'{"response":"b","done":true}']
    assert parser.close() == []
