"""Which server slot holds each buffer's prompt in its cache (llama-server's slots), as this
editor's own requests left them.

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

A slot keeps a buffer's prompt only until a request starts in another slot while it is idle:
llama-server at its defaults (a unified KV cache, a host-memory prompt cache) then saves every
idle slot to host memory and clears it. The server's own choice loads a saved prompt back into
the slot it picks; a request that names an emptied slot does not, and evaluates its whole
window (`make bench-real`: every return to a buffer after typing in another). So every request
this editor sends (`sent`, from transport/exchange.py: suggestions, next edits) marks the other
buffers' idle slots as perhaps emptied, and such a buffer's next request names no slot: the
server finds its prompt where it is (in the slot, by similarity, on a server that keeps idle
slots; in host memory otherwise), and the request after waits to hear where it runs
(pipeline/placing.py: current servers say it on every chunk, older ones on the last).

Instruction edits and next edits name no slot: the server's own choice gives them an idle
slot, never the one a buffer's requests wait for. A buffer's first request takes a slot nobody
has used yet, as `/slots` shows them (`choose`): it is named at once, so a key typed while it
runs names it too, as on a server of one slot. Where every slot has been used (by another
editor, an instruction edit, an earlier session) and not all by this editor's buffers, the
server chooses, as it does for a team. Once all slots hold this editor's buffers, a new
buffer takes the slot of the one used least recently. A request that fails forgets its
buffer's slot (the server may have restarted with fewer slots). With more editors on one
server than it has slots, two may name one slot and queue behind each other: such a team
gives the server a slot per editor (bench/team.py). Another editor's request empties this
editor's idle slots too, unseen by `sent`: after a pause (a buffer's slot idle CHECK_AFTER_S),
its next request reads `/slots` first (`to_check`, `check`), and a task that started in another
slot since the slot's last one leaves that request to the server's choice. A server started
with `-np N` splits its KV cache and keeps idle slots as they are.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import NamedTuple

__all__ = ["SlotState", "Slots"]


class SlotState(NamedTuple):
    """One slot as `/slots` shows it."""

    id: int
    busy: bool  # running a request now
    task: int = -1  # the id of the last task it ran (the server numbers them in order); -1: none

    @property
    def used(self) -> bool:
        """Whether it has run a task (its cache may hold somebody's prompt)."""
        return self.task >= 0


class Slots:
    # a slot idle this long is checked against `/slots` before it is named again (to_check)
    CHECK_AFTER_S = 0.5

    def __init__(self) -> None:
        # buffer -> the slot that ran its last request
        self._by_buf: dict[int, int] = {}
        # the slots this editor's requests ran in, the one that ran the last at the end
        self._recent: dict[int, None] = {}
        # buffers whose slot may no longer hold their prompt (see the module's doc)
        self._moved: set[int] = set()
        # slot -> this editor's requests named into it and not ended (a busy slot is not emptied)
        self._running: Counter[int] = Counter()
        # slot -> when its last request of this editor ended (time.monotonic()), until checked
        self._quiet_since: dict[int, float] = {}

    def of(self, buf: int) -> int | None:
        """The slot `buf`'s next request names: the one that ran its last request while it
        still holds its prompt; None: the server chooses."""
        return None if buf in self._moved else self._by_buf.get(buf)

    def known(self, buf: int) -> bool:
        """Whether a request of `buf` has run on this server (its prompt may be there still)."""
        return buf in self._by_buf

    def learn(self, buf: int, slot: int) -> None:
        """A request of `buf` runs in `slot`: the buffer whose prompt was there no longer has it
        there (its next request names no slot)."""
        if self._by_buf.get(buf) == slot and buf not in self._moved and next(reversed(self._recent)) == slot:
            return  # (said again: current servers say the slot on every chunk)
        for other, held in self._by_buf.items():
            if held == slot and other != buf:
                self._moved.add(other)
        self._moved.discard(buf)
        self._by_buf[buf] = slot
        self._recent.pop(slot, None)
        self._recent[slot] = None

    def sent(self, slot: int | None) -> None:
        """A request of this editor goes to `slot` (None: where the server chooses): every other
        idle slot may be emptied as it starts (see the module's doc)."""
        if slot is not None:
            self._running[slot] += 1
        for buf, held in self._by_buf.items():
            if held != slot and not self._running[held]:
                self._moved.add(buf)

    def ended(self, slot: int | None) -> None:
        """A request `sent` to `slot` has ended, or was closed."""
        if slot is not None and self._running[slot] > 0:
            self._running[slot] -= 1
            if not self._running[slot]:
                self._quiet_since[slot] = time.monotonic()

    def to_check(self, buf: int, now: float) -> bool:
        """Whether `buf`'s slot has been idle long enough (CHECK_AFTER_S: a pause, not the
        next key) for another editor's request to have emptied it unseen: `check` it against
        `/slots` before naming it. Once per pause."""
        slot = self.of(buf)
        if slot is None or self._running[slot]:
            return False
        since = self._quiet_since.get(slot)
        return since is not None and now - since >= self.CHECK_AFTER_S

    def check(self, buf: int, states: list[SlotState]) -> None:
        """`states` (`/slots` now): a task that started after the last one in `buf`'s slot, in
        another slot, may have emptied it while it was idle (one of this editor's would have
        said so to `sent`: another editor's), and a task running in it now is not this
        editor's. Either way its next request names no slot (the server finds its prompt)."""
        slot = self.of(buf)
        if slot is None:
            return
        self._quiet_since.pop(slot, None)
        mine = next((s for s in states if s.id == slot), None)
        if mine is None or mine.busy or any(s.task > mine.task for s in states if s.id != slot):
            self._moved.add(buf)

    def choose(self, buf: int, states: list[SlotState]) -> int | None:
        """The slot for `buf`'s first request, kept as its slot; None: the server's choice (see
        the module's doc). `states`: the server's slots as `/slots` shows them now."""
        if buf in self._by_buf:  # (a request of it placed meanwhile)
            return self.of(buf)
        idle = {s.id for s in states if not s.busy}
        slot = next((s.id for s in states if s.id in idle and not s.used and s.id not in self._recent), None)
        if slot is None and states and all(s.id in self._recent for s in states):
            slot = next((ran for ran in self._recent if ran in idle), None)  # (least recent first)
        if slot is not None:
            self.learn(buf, slot)
        return slot

    def clear(self) -> None:
        """The server went away: it may come back with other slots, all empty (the requests in
        flight still end here)."""
        self._by_buf.clear()
        self._moved.clear()
        self._recent.clear()
        self._quiet_since.clear()

    def forget(self, buf: int) -> None:
        self._by_buf.pop(buf, None)
        self._moved.discard(buf)
