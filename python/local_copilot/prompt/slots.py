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
its last chunk (partial chunks do not say). A buffer's first request takes a slot nobody has
used yet, as `/slots` shows them (`choose`): it is named at once, so a key typed while it
runs names it too, as on a server of one slot. Where every slot has been used (by another
editor, an instruction edit, an earlier session) and not all by this editor's buffers, the
server chooses, as it does for a team: the first request names none, and the next waits until
the server has said where it runs (pipeline/placing.py). Once all slots hold this editor's
buffers, a new buffer takes the slot of the one used least recently. A request that fails
forgets its buffer's slot (the server may have restarted with fewer slots). With more editors
on one server than it has slots, two may name one slot and queue behind each other: such a
team gives the server a slot per editor (bench/team.py).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["SlotState", "Slots"]


class SlotState(NamedTuple):
    """One slot as `/slots` shows it."""

    id: int
    busy: bool  # running a request now
    used: bool  # has run one (its cache may hold somebody's prompt)


class Slots:
    def __init__(self) -> None:
        # buffer -> its slot, the buffer whose request ran last at the end
        self._by_buf: dict[int, int] = {}

    def of(self, buf: int) -> int | None:
        """The slot that ran `buf`'s last request, None until the server has placed one of them."""
        return self._by_buf.get(buf)

    def learn(self, buf: int, slot: int) -> None:
        """A request of `buf` runs in `slot`: the buffer that held it before no longer does (its
        next request chooses again instead of taking the slot back from this one)."""
        for other, held in list(self._by_buf.items()):
            if held == slot and other != buf:
                del self._by_buf[other]
        self._by_buf.pop(buf, None)
        self._by_buf[buf] = slot

    def choose(self, buf: int, states: list[SlotState]) -> int | None:
        """The slot for `buf`'s first request, kept as its slot; None: the server's choice (see
        the module's doc). `states`: the server's slots as `/slots` shows them now."""
        if buf in self._by_buf:  # (a request of it placed meanwhile)
            return self._by_buf[buf]
        ours = set(self._by_buf.values())
        idle = {s.id for s in states if not s.busy}
        slot = next((s.id for s in states if s.id in idle and not s.used and s.id not in ours), None)
        if slot is None and states and all(s.id in ours for s in states):
            slot = next((held for held in self._by_buf.values() if held in idle), None)  # (least recent first)
        if slot is not None:
            self.learn(buf, slot)
        return slot

    def forget(self, buf: int) -> None:
        self._by_buf.pop(buf, None)
