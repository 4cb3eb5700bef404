"""Which server slot holds each buffer's prompt in its cache (llama-server's `id_slot`).

A server with several slots (llama-server's default is 4) gives a request the idle slot whose
cache holds the most of its prompt, else the least recently used one. While the user types, a
request is often sent while its predecessor still runs (that one stops once the server notices
its closed stream), so the slot holding the buffer's prompt is busy: the new request goes to
another slot and the whole window is evaluated again, a second or more on a CPU. A request
that names its buffer's slot waits for it instead, a moment, and finds its prompt cached.

A buffer's slot is the one that ran its first request, as the server says on the last chunk;
none is handed out here, so several editors sharing one server spread over its slots as the
server places their first requests. A request that fails forgets its buffer's slot (the
server may have restarted with fewer).
"""

from __future__ import annotations

__all__ = ["Slots"]


class Slots:
    def __init__(self) -> None:
        self._by_buf: dict[int, int] = {}

    def of(self, buf: int) -> int | None:
        """The slot `buf`'s requests name, None until the server has placed one of them."""
        return self._by_buf.get(buf)

    def learn(self, buf: int, slot: int) -> None:
        """The server ran a request of `buf` in `slot`."""
        self._by_buf[buf] = slot

    def forget(self, buf: int) -> None:
        self._by_buf.pop(buf, None)

    def clear(self) -> None:
        self._by_buf.clear()
