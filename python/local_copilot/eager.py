"""Run a coroutine right here up to its first real suspension; a task continues the rest.

A keystroke's request to a server known to answer within a frame completes without ever
suspending (the exchange waits for the answer in poll(): transport/exchange.py): stepped in the
snapshot's own callback it shows the suggestion with no task, timer or loop turn. asyncio's own
eager tasks (`asyncio.eager_task_factory`) arrive with Python 3.12; this is the same step for
3.11.
"""

from __future__ import annotations

import asyncio
import collections.abc
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["start"]


def start(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Step `coro` now; None when it finished in that step, else the task that runs the rest."""
    try:
        awaited = coro.send(None)
    except StopIteration:
        return None
    return asyncio.get_running_loop().create_task(_Rest(coro, awaited))


_FIRST = object()


class _Rest(collections.abc.Coroutine):  # type: ignore[type-arg]
    """`coro` with its first step taken already, as the task's own coroutine: the task's first
    step gets what that step yielded, and every later send, throw and close goes into `coro`.
    A cancellation that comes before the task's first step goes into `coro` too (an `async
    def` wrapper would be closed unstarted, leaving `coro` suspended mid-read, its `finally`
    clauses never run)."""

    __slots__ = ("coro", "awaited")

    def __init__(self, coro: Coroutine[Any, Any, None], awaited: Any) -> None:
        self.coro, self.awaited = coro, awaited

    def send(self, value: Any) -> Any:
        awaited, self.awaited = self.awaited, _FIRST
        if awaited is not _FIRST:
            return awaited
        return self.coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        self.awaited = _FIRST
        if val is None and tb is None:
            return self.coro.throw(typ)
        return self.coro.throw(typ, val, tb)

    def close(self) -> None:
        self.coro.close()

    def __await__(self) -> Generator[Any, Any, None]:
        raise TypeError("a task's coroutine (eager.start), not to be awaited")
