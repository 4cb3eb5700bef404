"""Everything in flight for one buffer, owned in one place, with one `cancel(kind)`.

A buffer has at most one request task (a first part, its continuation, or alternatives), one
speculative request, one pause timer (a first part shown, its rest fetched once typing
pauses) and one snapshot deferred behind the request the server has not answered yet (what
Lua's status() calls 'waiting' is Lua's own: trigger.lua, see doc/architecture.md). Keeping them
in one object means cancelling, forgetting and handing over cannot leave one of them behind.
Request kinds that come later (next edits, instruction edits, the completion menu's
request of Neovim's in-process language server) are further fields here, so a wiped buffer
(`cancel()`) stops each of them and closes its stream.

Instruction edits (instruct/runner.py) are tasks keyed by the edit's id, beside one prompt
warm-up: several edits in different places of a buffer run at once. `cancel()` is the
keystroke path's latest-wins (`cancel(KEYSTROKE)`) leaves them alone (typing elsewhere in the
buffer must not stop an edit the user waits for); `cancel("edit")` stops them, and `cancel()`
stops everything (the buffer is wiped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from . import eager as _eager
from .snapshot import Snapshot

if TYPE_CHECKING:
    from .ghost.quiet import Hidden

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


# what a keystroke makes stale: the suggestion's request (its task, its pause timer, the
# snapshot deferred behind it), the speculative request and the next-edit request. A warm-up of the
# same place and the instruction edits stay (see cancel_warm's reason below and the module's).
KEYSTROKE = ("suggestion", "speculative", "next_edit")
KINDS = (*KEYSTROKE, "warm", "edit", "menu")


class BufferState:
    __slots__ = ("task", "generation", "speculative", "pause", "deferred", "unanswered", "last", "typing", "warm",
                 "warm_row", "next_edit", "edits", "edit_warm", "menu", "hidden")

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None  # the suggestion's request task (None: ran eagerly)
        # counts the suggestion's requests started or cancelled: a request whose number it no
        # longer is has been replaced (owns())
        self.generation = 0
        self.speculative: asyncio.Task[None] | None = None
        self.pause: asyncio.TimerHandle | None = None  # continues a first part once typing pauses
        # the newest snapshot, waiting for the answer to `task`'s request to start (see
        # Engine.submit): the server would evaluate that request anyway
        self.deferred: Snapshot | None = None
        # `task`'s request is out and the server has not answered it yet
        self.unanswered = False
        self.last: tuple[Snapshot, str] | None = None  # the last finished snapshot and its text
        # what the last quiet answer hid (ghost/quiet.py), until the user types it or moves on
        self.hidden: Hidden | None = None
        self.typing = Typing()
        # a warm-up: the prompt of the place the cursor rests at, evaluated with nothing to
        # generate (Engine.warm)
        self.warm: asyncio.Task[None] | None = None
        self.warm_row = -1
        self.next_edit: asyncio.Task[None] | None = None  # the next-edit request (next_edit/request.py)
        self.edits: dict[int, asyncio.Task[None]] = {}  # instruction edits in flight, by id
        self.edit_warm: asyncio.Task[None] | None = None  # the prompt of the edit being typed
        # the completion menu's request (nvim/lsp_requests.py); typing does not stop it, the
        # menu's next request does
        self.menu: asyncio.Task[Any] | None = None

    def start(self, run: Callable[[int], Coroutine[Any, Any, None]], *, eager: bool = False) -> None:
        """Run `run(number)` as the suggestion's request (the one before must be done or
        cancelled); `number` is what owns() asks of it. `eager`: stepped right here, up to its
        first wait (eager.py)."""
        self.generation += 1
        number = self.generation
        self.task = None
        coro = run(number)
        task = _eager.start(coro) if eager else asyncio.get_running_loop().create_task(coro)
        if self.generation == number:  # (a request that finished eagerly may have started the next)
            self.task = task

    def owns(self, number: int) -> bool:
        """Whether request `number` is still the suggestion's (not replaced by a newer one)."""
        return self.generation == number

    def pending(self) -> bool:
        """A live request task whose server has not answered: a new key waits for it."""
        return self.unanswered and self.task is not None and not self.task.done()

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

    def running(self) -> list[asyncio.Task[Any]]:
        """The tasks still running for this buffer (a closing host waits for them to wind down)."""
        tasks = (self.task, self.speculative, self.warm, self.next_edit, self.edit_warm, self.menu,
                 *self.edits.values())
        return [t for t in tasks if t is not None and not t.done()]

    def warming(self) -> bool:
        return self.warm is not None and not self.warm.done()

    def cancel(self, kind: str | tuple[str, ...] | None = None, *, edit_id: int | None = None) -> bool:
        """Stop what is in flight of `kind` (one of KINDS, several, or all when None); True when
        a live request of the suggestion or an edit was cancelled. Cancelling a task exits its
        `async with` over the HTTP exchange, which closes the connection: the server stops
        generating.

        "edit" stops edit `edit_id`, or every edit and the edit prompt's warm-up. "warm": a
        request at the same place does not stop the warm-up (what it evaluates is that
        request's prompt too, and the server finishes the batch it is in anyway), so only a
        newer place or a closed buffer does."""
        kinds = KINDS if kind is None else (kind,) if isinstance(kind, str) else kind
        stopped = False
        if "suggestion" in kinds:
            self.deferred = None
            # what was unanswered is the request cancelled here: a task cancelled before it
            # ran cannot say so, and a snapshot deferred on its word would wait for nothing
            self.unanswered = False
            self.generation += 1
            if self.pause is not None:
                self.pause.cancel()
                self.pause = None
            task, self.task = self.task, None
            stopped = task is not None and _stop(task)
        if "speculative" in kinds and self.speculative is not None:
            task, self.speculative = self.speculative, None
            _stop(task)
        if "next_edit" in kinds and self.next_edit is not None:
            task, self.next_edit = self.next_edit, None
            _stop(task)
        if "warm" in kinds and self.warm is not None:
            task, self.warm = self.warm, None
            _stop(task)
        if "menu" in kinds and self.menu is not None:
            task, self.menu = self.menu, None
            _stop(task)
        if "edit" in kinds:
            if edit_id is None:
                _stop(self.edit_warm)
                self.edit_warm = None
            for i in list(self.edits) if edit_id is None else [edit_id]:
                stopped = _stop(self.edits.pop(i, None)) or stopped
        return stopped

    def in_flight(self) -> dict[str, int]:
        """What is running (tests and the bench wait until nothing is)."""
        return {
            "tasks": int(self.task is not None and not self.task.done()),
            "speculative": int(self.speculative is not None and not self.speculative.done()),
            "pauses": int(self.pause is not None and not self.pause.cancelled()),
            "next_edits": int(self.next_edit is not None and not self.next_edit.done()),
            "edits": sum(1 for t in self.edits.values() if not t.done()),
            "warmups": int(self.warming()),
            "menus": int(self.menu is not None and not self.menu.done()),
        }


def _stop(task: asyncio.Task[Any] | None) -> bool:
    """Cancel `task`; True when it was live."""
    if task is not None and not task.done():
        task.cancel()
        return True
    return False
