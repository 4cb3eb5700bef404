"""Which server answers completions now: the active entry, or the next of the entries the user
listed in `fallback` when it is down, refuses, or has not started answering in time.

Text goes only to entries the user named (the active one and those in `fallback`). Switching
is said once ("team is down: completing with local"), coming back once ("team answers
again"); while a later entry answers, the earlier ones are asked whether they are up again
(their ready path, at most every RECHECK_S, in the background: a request never waits on it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

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

    def __init__(self, entries: list[tuple[str, Backend]], after_s: float,
                 notify: Callable[[str, str], None], switched: Callable[[str, Backend], None]) -> None:
        """`entries`: the active entry first; `after_s`: how long the answer's start may take
        before the next entry is asked (only where there is one); `switched` is told each
        change of the entry that answers."""
        self.entries = entries
        self.after_s = after_s
        self._notify = notify
        self._switched = switched
        self.at = 0  # the entry that answers now
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

    def fall_back(self, why: str) -> None:
        """The entry that answers now cannot (`why`): the next one answers from now on."""
        old = self.name
        self.at += 1
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

    async def _probe_earlier(self) -> None:
        for i in range(self.at):
            name, backend = self.entries[i]
            if await backend.ready(self.PROBE_TIMEOUT_S):
                now = self.name
                self.at = i
                log.info("%s answers again (instead of %s)", name, now)
                self._notify(f"local-copilot: {name} answers again: completing with it instead of {now}", "info")
                self._switched(name, backend)
                return

    def close(self) -> None:
        if self._recheck is not None:
            self._recheck.cancel()
