"""Run a coroutine right here up to its first real suspension; a task continues the rest.

A keystroke's request to a server known to answer within a frame completes without ever
suspending (the exchange waits for the answer in poll(): backends/exchange.py): stepped in the
snapshot's own callback it shows the suggestion with no task, timer or loop turn. asyncio's own
eager tasks (`asyncio.eager_task_factory`) arrive with Python 3.12; this is the same step for
3.11.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["start"]


def start(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Step `coro` now; None when it finished in that step, else the task that runs the rest."""
    try:
        awaited = coro.send(None)
    except StopIteration:
        return None
    return asyncio.get_running_loop().create_task(_rest(coro, awaited))


async def _rest(coro: Coroutine[Any, Any, None], awaited: Any) -> None:
    await _Resume(coro, awaited)


class _Resume:
    """`await coro` with its first step taken already: the task waits on what that step
    yielded, and sends, throws and closes into `coro` as `await` would."""

    __slots__ = ("coro", "awaited")

    def __init__(self, coro: Coroutine[Any, Any, None], awaited: Any) -> None:
        self.coro, self.awaited = coro, awaited

    def __await__(self) -> Generator[Any, Any, None]:
        return _drive(self.coro, self.awaited)


def _drive(coro: Coroutine[Any, Any, None], awaited: Any) -> Generator[Any, Any, None]:
    while True:
        try:
            sent = yield awaited
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # a cancellation (or a future's error) goes into coro
            try:
                awaited = coro.throw(exc)
            except StopIteration:
                return
            continue
        try:
            awaited = coro.send(sent)
        except StopIteration:
            return
