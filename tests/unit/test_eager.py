"""eager.start: a coroutine stepped right here, a task for the rest of it."""

from __future__ import annotations

import asyncio

from local_copilot import eager


async def test_a_coroutine_that_never_waits_finishes_in_the_step() -> None:
    done: list[str] = []

    async def quick() -> None:
        done.append("ran")

    assert eager.start(quick()) is None
    assert done == ["ran"]  # before any loop turn


async def test_the_rest_runs_in_a_task_after_the_first_step() -> None:
    steps: list[str] = []

    async def two_steps() -> None:
        steps.append("first")
        await asyncio.sleep(0)
        steps.append("rest")

    task = eager.start(two_steps())
    assert steps == ["first"] and task is not None
    await task
    assert steps == ["first", "rest"]


async def test_a_task_cancelled_before_its_first_step_unwinds_the_coroutine() -> None:
    """The coroutine is suspended mid-read (a stream open); cancelled at once, as a keystroke
    does to a speculative request, its `finally` still runs: the stream is closed."""
    closed: list[str] = []
    never = asyncio.get_running_loop().create_future()

    async def reading() -> None:
        try:
            await never
        finally:
            await asyncio.sleep(0)  # closing a stream waits, too
            closed.append("stream closed")

    task = eager.start(reading())
    assert task is not None
    task.cancel()
    await asyncio.wait([task])
    assert task.cancelled() and closed == ["stream closed"]
