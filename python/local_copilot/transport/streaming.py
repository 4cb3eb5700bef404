"""Incremental parsers for the servers' streams: SSE (llama.cpp, OpenAI) and NDJSON (Ollama).

They accept bytes cut anywhere (inside a line, inside a UTF-8 sequence) and yield whole
payloads; the backends decode each payload with a msgspec Decoder created once.
"""

from __future__ import annotations

import msgspec

from ..errors import ErrorEvent, NotAStream, StreamLineTooLong
from .limits import MAX_EVENT_BYTES, MAX_STREAM_BYTES, server_words

__all__ = ["MAX_EVENT_BYTES", "MAX_STREAM_BYTES", "NDJSONParser", "SSEParser"]

# An event larger than MAX_EVENT_BYTES (one line, or all the `data:` lines of one event) is
# not a completion chunk, nor is a stream of more than MAX_STREAM_BYTES: refused instead of
# buffered (limits.py): StreamLineTooLong. A line that is no event-stream field is NotAStream,
# an `error:` field ErrorEvent (errors.py).


# the event-stream fields (https://html.spec.whatwg.org/#event-stream-interpretation);
# llama-server writes its errors as an `error:` field
_FIELDS = (b"data", b"event", b"id", b"retry")


class _LineBuffer:
    def __init__(self) -> None:
        self._buf = bytearray()
        self._total = 0  # bytes of the whole stream

    def lines(self, data: bytes) -> list[bytes]:
        self._total += len(data)
        if self._total > MAX_STREAM_BYTES:
            raise StreamLineTooLong(f"the server sent more than {MAX_STREAM_BYTES // (1024 * 1024)} MB in one stream")
        self._buf += data
        if b"\n" not in data:
            if len(self._buf) > MAX_EVENT_BYTES:
                raise StreamLineTooLong(f"the server sent a stream line longer than {MAX_EVENT_BYTES} bytes")
            return []
        *complete, rest = self._buf.split(b"\n")
        self._buf = bytearray(rest)
        return [bytes(ln[:-1]) if ln.endswith(b"\r") else bytes(ln) for ln in complete]


class SSEParser:
    """`feed(bytes) -> [data payload, ...]`; comments (`:ping`) and other fields are skipped."""

    def __init__(self) -> None:
        self._lines = _LineBuffer()
        self._data: list[bytes] = []
        self._size = 0  # bytes of the event's data lines so far

    def feed(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        for line in self._lines.lines(data):
            if not line:  # blank line ends an event
                if self._data:
                    out.append(b"\n".join(self._data))
                    self._data, self._size = [], 0
            elif line.startswith(b"data:"):
                value = line[5:]
                self._size += len(value)
                if self._size > MAX_EVENT_BYTES:
                    raise StreamLineTooLong(f"the server sent a stream event longer than {MAX_EVENT_BYTES} bytes")
                self._data.append(value[1:] if value.startswith(b" ") else value)
            elif not line.startswith(b":"):  # ':' starts a comment (a ping)
                name, _, value = line.partition(b":")
                if name == b"error":  # llama-server: `error: {"code": 500, "message": ...}`
                    raise ErrorEvent(f"the server sent an error in the stream: {_said(value)}")
                if name not in _FIELDS:  # 'event:', 'id:', 'retry:' carry nothing we use
                    raise NotAStream(line)
        return out

    def close(self) -> list[bytes]:
        """End of stream: a last event without its blank line still counts."""
        out = self.feed(b"\n\n")
        return out


def _said(value: bytes) -> str:
    """The server's words in an `error:` field: its JSON object's message, else the text."""
    text = value.strip().decode("utf-8", "replace")
    try:
        return server_words(msgspec.json.decode(text))
    except msgspec.DecodeError:
        return server_words(text)


class NDJSONParser:
    def __init__(self) -> None:
        self._lines = _LineBuffer()

    def feed(self, data: bytes) -> list[bytes]:
        return [ln for ln in self._lines.lines(data) if ln.strip()]

    def close(self) -> list[bytes]:
        return self.feed(b"\n")
