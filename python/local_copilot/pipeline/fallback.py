"""Which server answers completions now: the active entry, or the next of the entries the user
listed in `fallback` when it is down, refuses, or is late to start answering.

Text goes only to entries the user named (the active one and those in `fallback`). A server
that cannot answer (down, refusing) is left at once. Lateness is judged on the entry's last
WINDOW requests, not on one: most of them must have started answering later than
`fallback_after_ms` (with no history yet, the one request there is); until then a late answer
is awaited, so one slow answer from a server that is usually in time switches nothing.

Coming back asks for what leaving asked for: while a later entry answers, the earlier ones
are asked (in the background, at most every RECHECK_S: a request never waits on it) whether
they are up (their ready path) and then whether they start answering the user's last request
in time, RETURN_AFTER times in a row; a server that is up but still slow stays left. So a
slow but healthy server is left once and not taken back and forth, and each change is said
once: switching ("team is down: completing with local"), coming back ("team answers again").
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from ..backends import Backend
from ..errors import BackendError, ServerError
from ..log import log

__all__ = ["Chain", "falls_back"]


def falls_back(exc: Exception) -> bool:
    """Whether a failure says the server cannot answer (down, refusing, not a completion
    server), so the next entry may: a prompt it found too long says nothing of the server."""
    return isinstance(exc, BackendError) and not (isinstance(exc, ServerError) and exc.context_overflow)


class Chain:
    """The entries completions may go to, in order of preference, and which one answers now."""

    RECHECK_S = 10.0  # how often an earlier entry is asked whether it is up again
    PROBE_TIMEOUT_S = 2.0
    WINDOW = 5  # the recent requests whose start in time or late decides leaving an entry
    RETURN_AFTER = 2  # probes answered in time in a row before an earlier entry answers again

    def __init__(self, entries: list[tuple[str, Backend]], after_s: float,
                 notify: Callable[[str, str], None], switched: Callable[[str, Backend], None],
                 answers_in_time: Callable[[Backend, float], Awaitable[bool]]) -> None:
        """`entries`: the active entry first; `after_s`: how long the answer's start may take
        (only where a next entry is there to ask); `switched` is told each change of the entry
        that answers; `answers_in_time(backend, seconds)` asks an earlier entry the user's
        last request and says whether it starts answering within `seconds`."""
        self.entries = entries
        self.after_s = after_s
        self._notify = notify
        self._switched = switched
        self._answers_in_time = answers_in_time
        self.at = 0  # the entry that answers now
        # its last requests: True for one that started answering late (or never did)
        self._late: deque[bool] = deque(maxlen=self.WINDOW)
        self._recheck: asyncio.Task[None] | None = None
        self._rechecked = float("-inf")

    @property
    def name(self) -> str:
        return self.entries[self.at][0]

    @property
    def backend(self) -> Backend:
        return self.entries[self.at][1]

    def has_next(self) -> bool:
        return self.at + 1 < len(self.entries)

    def timed(self, late: bool) -> None:
        """A request to the entry that answers now started answering in time, or `late`."""
        self._late.append(late)

    def leaves_if_late(self) -> bool:
        """Whether one more late start would make most of the window late: the request about
        to go out is then cut at `after_s` and the next entry answers it and those after."""
        window = deque(self._late, maxlen=self.WINDOW)
        window.append(True)
        return sum(window) * 2 > len(window)

    def fall_back(self, why: str) -> None:
        """The entry that answers now cannot (`why`): the next one answers from now on."""
        old = self.name
        self.at += 1
        self._late.clear()  # (the next entry's record starts here)
        self._rechecked = asyncio.get_running_loop().time()
        log.warning("%s %s; completing with %s", old, why, self.name)
        self._notify(f"local-copilot: {old} {why}: completing with {self.name}", "warn")
        self._switched(self.name, self.backend)

    def recheck(self) -> None:
        """While a later entry answers, ask the earlier ones (in the background, at most every
        RECHECK_S) whether they are up again; the first that is answers from then on."""
        if self.at == 0 or (self._recheck is not None and not self._recheck.done()):
            return
        loop = asyncio.get_running_loop()
        if loop.time() - self._rechecked < self.RECHECK_S:
            return
        self._rechecked = loop.time()
        self._recheck = loop.create_task(self._probe_earlier())

    async def _back(self, backend: Backend) -> bool:
        """Whether `backend` is up and starts answering in time, RETURN_AFTER times in a row
        (the first may evaluate the whole prompt: those after find it in the server's cache)."""
        if not await backend.ready(self.PROBE_TIMEOUT_S):
            return False
        for _ in range(self.RETURN_AFTER):
            if not await self._answers_in_time(backend, self.after_s):
                return False
        return True

    async def _probe_earlier(self) -> None:
        for i in range(self.at):
            name, backend = self.entries[i]
            if await self._back(backend):
                now = self.name
                self.at = i
                # what it showed counts: one late request after coming back does not leave it
                self._late = deque([False] * self.RETURN_AFTER, maxlen=self.WINDOW)
                log.info("%s answers again (instead of %s)", name, now)
                self._notify(f"local-copilot: {name} answers again: completing with it instead of {now}", "info")
                self._switched(name, backend)
                return

    def close(self) -> None:
        if self._recheck is not None:
            self._recheck.cancel()
