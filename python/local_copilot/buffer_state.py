"""Everything in flight for one buffer, owned in one place, with one `cancel()`.

A buffer has at most one request task (a first part, its continuation, or alternatives), one
speculative request, one pause timer (a first part shown, its rest fetched once typing
pauses) and one snapshot waiting for the request the server has not answered yet. Keeping them
in one object means cancelling, forgetting and handing over cannot leave one of them behind.
Request kinds that come later (next edits, instruction edits) are further fields here.

Instruction edits (instruct/runner.py) are tasks keyed by the edit's id, beside one prompt
warm-up: several edits in different places of a buffer run at once. `cancel()` is the
keystroke path's latest-wins and leaves them alone (typing elsewhere in the buffer must not
stop an edit the user waits for); `cancel_edits()` stops them, and `close()` stops everything
(the buffer is wiped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from .snapshot import Snapshot

__all__ = ["BufferState", "Typing"]


class Typing:
    """How fast the user types in a buffer: the smoothed interval between keystrokes.

    The editor measures it (it sees every key; the host sees only the snapshots it is sent)
    and sends it with each snapshot; the host only reads it here."""

    # how long the user must stop typing before a first part is continued: 2 typing
    # intervals (a slower key is a pause), within these bounds
    PAUSE_MIN_S = 0.06
    PAUSE_MAX_S = 0.3

    __slots__ = ("at", "interval_s")

    def __init__(self) -> None:
        self.at = float("-inf")  # loop time of the last snapshot
        self.interval_s: float | None = None

    def key(self, now: float, interval_ms: float | None) -> None:
        self.at = now
        self.interval_s = None if interval_ms is None else interval_ms / 1000

    def pause_end(self) -> float:
        """The loop time at which the user has stopped typing for a bit."""
        iv = self.interval_s
        return self.at + (self.PAUSE_MIN_S if iv is None else min(self.PAUSE_MAX_S, max(self.PAUSE_MIN_S, 2 * iv)))


class BufferState:
    __slots__ = ("task", "speculative", "pause", "waiting", "unanswered", "last", "typing", "warm", "warm_row",
                 "next_edit", "edits", "edit_warm")

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None  # the request task
        self.speculative: asyncio.Task[None] | None = None
        self.pause: asyncio.TimerHandle | None = None  # continues a first part once typing pauses
        # the newest snapshot, waiting for the answer to `task`'s request to start (see
        # Engine.submit): the server would evaluate that request anyway
        self.waiting: Snapshot | None = None
        # `task`'s request is out and the server has not answered it yet
        self.unanswered = False
        self.last: tuple[Snapshot, str] | None = None  # the last finished snapshot and its text
        self.typing = Typing()
        # a warm-up: the prompt of the place the cursor rests at, evaluated with nothing to
        # generate (Engine.warm); `cancel()` leaves it alone (see cancel_warm)
        self.warm: asyncio.Task[None] | None = None
        self.warm_row = -1
        self.next_edit: asyncio.Task[None] | None = None  # the next-edit request (next_edit/request.py)
        self.edits: dict[int, asyncio.Task[None]] = {}  # instruction edits in flight, by id
        self.edit_warm: asyncio.Task[None] | None = None  # the prompt of the edit being typed

    def start_edit(self, edit_id: int, coro: Coroutine[Any, Any, None]) -> None:
        """Run edit `edit_id` (the one before with that id must be cancelled)."""
        task = self.edits[edit_id] = asyncio.get_running_loop().create_task(coro)

        def done(t: asyncio.Task[None]) -> None:
            if self.edits.get(edit_id) is t:
                del self.edits[edit_id]

        task.add_done_callback(done)

    def start_edit_warm(self, coro: Coroutine[Any, Any, None]) -> None:
        if self.edit_warm is not None and not self.edit_warm.done():
            self.edit_warm.cancel()
        self.edit_warm = asyncio.get_running_loop().create_task(coro)

    def cancel_edits(self, edit_id: int | None = None) -> bool:
        """Stop edit `edit_id` (every edit and the warm-up when None); True when one was running."""
        ids = list(self.edits) if edit_id is None else [edit_id]
        if edit_id is None and self.edit_warm is not None:
            self.edit_warm.cancel()
            self.edit_warm = None
        stopped = False
        for i in ids:
            task = self.edits.pop(i, None)
            if task is not None and not task.done():
                task.cancel()
                stopped = True
        return stopped

    def close(self) -> None:
        """Stop everything, the warm-up and edits too (the buffer is gone)."""
        self.cancel()
        self.cancel_warm()
        self.cancel_edits()

    def start(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run `coro` as the buffer's request task (the one before must be done or cancelled)."""
        self.task = asyncio.get_running_loop().create_task(coro)
        return self.task

    def owns(self, task: asyncio.Task[Any] | None) -> bool:
        """Whether `task` is still the buffer's request task (not replaced by a newer one)."""
        return self.task is task

    def answered(self, task: asyncio.Task[Any] | None) -> None:
        """`task`'s request was answered (or ended): clear the flag when it is still ours
        (a task cancelled for a newer one leaves the newer one's flag alone)."""
        if self.task is task or self.task is None:
            self.unanswered = False

    def pending(self) -> bool:
        """A live request task whose server has not answered: a new key waits for it."""
        return self.unanswered and self.task is not None and not self.task.done()

    def cancel_speculative(self) -> None:
        task, self.speculative = self.speculative, None
        if task is not None and not task.done():
            task.cancel()

    def cancel_next_edit(self) -> None:
        task, self.next_edit = self.next_edit, None
        if task is not None and not task.done():
            task.cancel()

    def cancel_warm(self) -> None:
        """Stop the warm-up (a newer place, or the buffer is gone). A request at the same place
        does not: what the warm-up evaluates is that request's prompt too, and the server
        finishes the batch it is in anyway, so cancelling it would only throw it away."""
        task, self.warm = self.warm, None
        if task is not None and not task.done():
            task.cancel()

    def warming(self) -> bool:
        return self.warm is not None and not self.warm.done()

    def cancel(self) -> bool:
        """Stop everything in flight; True when a live request task was cancelled.

        Cancelling a task exits its `async with` over the HTTP exchange, which closes the
        connection: the server stops generating."""
        self.waiting = None
        # what was unanswered is the request cancelled here: a task cancelled before it ran
        # cannot say so, and a snapshot deferred on its word would wait for nothing
        self.unanswered = False
        if self.pause is not None:
            self.pause.cancel()
            self.pause = None
        self.cancel_speculative()
        self.cancel_next_edit()
        task, self.task = self.task, None
        if task is not None and not task.done():
            task.cancel()
            return True
        return False

    def in_flight(self) -> dict[str, int]:
        """What is running (tests and the bench wait until nothing is)."""
        return {
            "tasks": int(self.task is not None and not self.task.done()),
            "speculative": int(self.speculative is not None and not self.speculative.done()),
            "pauses": int(self.pause is not None and not self.pause.cancelled()),
            "next_edits": int(self.next_edit is not None and not self.next_edit.done()),
            "edits": sum(1 for t in self.edits.values() if not t.done()),
            "warmups": int(self.warming()),
        }

    def on_task_done(self, fn: Callable[[asyncio.Task[None]], None]) -> None:
        if self.task is not None:
            self.task.add_done_callback(fn)
