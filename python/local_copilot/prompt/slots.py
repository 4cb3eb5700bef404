"""Which server slot holds each buffer's prompt in its cache (llama-server's slots).

A server with several slots (llama-server's default is 4) gives a request the idle slot whose
cache holds the most of its prompt, else the least recently used one. While the user types, a
request often supersedes one that still runs (it stops once the server notices its closed
stream), so the slot holding the buffer's prompt is busy: sent at once, the new request goes to
another slot and the whole window is evaluated again, a second or more on a CPU. So a request
sent after a cancelled one first waits, a moment, until that slot is idle
(Backend.slot_idle); the server's own choice then finds the prompt cached.

A buffer's slot is the one that ran its last request, as the server says on the last chunk.
The request does not name it (id_slot): llama-server with its prompt cache on aborts when a
request names a slot that is still evaluating another prompt. A request that fails forgets its
buffer's slot (the server may have restarted).
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
