"""Which server slot holds each buffer's prompt in its cache (llama-server's slots).

A server with several slots (llama-server's default is 4) gives a request the idle slot whose
cache holds the most of its prompt, else the least recently used one. While the user types, a
request often supersedes one that still runs: the server notices the closed stream only at its
next token, or once the prompt it is evaluating is done. Sent unnamed at that moment, the new
request goes to another slot and the whole window is evaluated again, a second or more on a
CPU, beside the old evaluation. So every request of a buffer (typed suggestions, their
continuations, warm-ups, speculation) names the buffer's slot (`id_slot`, pipeline/complete.py):
the server holds such a request until the slot's last one has stopped, then finds the window
cached and evaluates what changed. A warm-up that went elsewhere would leave the first key at
the new place to evaluate the window again in the buffer's slot, beside the warm-up.

Instruction edits and next edits name no slot: the server's own choice gives them an idle
slot (the one holding their prompt, or the least recently used), never the one a buffer's
requests wait for. A buffer's slot is the one that ran its last request, as the server says on
its last chunk (partial chunks do not say); the first request of a buffer names none, and the
next waits until the server has said where it runs (pipeline/placing.py). A request
that fails forgets its buffer's slot (the server may have restarted with fewer slots). With
more editors on one server than it has slots, two may name one slot and queue behind each
other: such a team gives the server a slot per editor (bench/team.py).
"""

from __future__ import annotations

__all__ = ["Slots"]


class Slots:
    def __init__(self) -> None:
        self._by_buf: dict[int, int] = {}

    def of(self, buf: int) -> int | None:
        """The slot that ran `buf`'s last request, None until the server has placed one of them."""
        return self._by_buf.get(buf)

    def learn(self, buf: int, slot: int) -> None:
        """The server ran a request of `buf` in `slot`."""
        self._by_buf[buf] = slot

    def forget(self, buf: int) -> None:
        self._by_buf.pop(buf, None)
