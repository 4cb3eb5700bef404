from __future__ import annotations

import pytest

from local_copilot.streaming import MAX_EVENT_BYTES, NDJSONParser, SSEParser

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


def test_ndjson_splits_lines_across_chunks() -> None:
    parser = NDJSONParser()
    assert parser.feed(b'{"response":"a"}\n{"resp') == [b'{"response":"a"}']
    assert parser.feed(b'onse":"b","done":true}\n') == [b'{"response":"b","done":true}']
    assert parser.close() == []
