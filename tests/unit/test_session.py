"""A buffer's session (session.py): what a keystroke stops and what it leaves running, and a
wiped buffer's `forget()` stopping every request kind and dropping what was kept. Real tasks
on the loop; the core built as the host builds it, with no server configured."""

from __future__ import annotations

import asyncio

from local_copilot.core import Core
from local_copilot.snapshot import Snapshot

from ..fakes.editor import RecordingEditor


def running() -> asyncio.Task[None]:
    return asyncio.get_running_loop().create_task(asyncio.sleep(60))


async def wound_down(*tasks: asyncio.Task[None]) -> bool:
    await asyncio.wait(tasks, timeout=1)
    return all(t.cancelled() for t in tasks)


async def test_a_keystroke_stops_the_suggestion_its_speculation_and_the_next_edit_not_edits_or_warm_ups() -> None:
    core = Core(RecordingEditor())
    session = core.state(1)
    stale = [running(), running(), running()]
    session.task, session.speculative, session.next_edit = stale
    session.warm, session.menu = running(), running()
    session.start_edit(7, asyncio.sleep(60))
    assert session.abort() is True  # a live request was stopped
    assert await wound_down(*stale)
    assert session.in_flight() == {"tasks": 0, "speculative": 0, "pauses": 0, "next_edits": 0, "edits": 1,
                                   "warmups": 1, "menus": 1}
    assert core.stats.counters["cancels"] == 1
    assert session.abort() is False  # nothing live: not counted again
    assert core.stats.counters["cancels"] == 1
    await core.close()


async def test_forgetting_a_buffer_stops_everything_in_flight_there_and_drops_its_session() -> None:
    core = Core(RecordingEditor())
    session = core.state(1)
    other = core.state(2)
    session.task, session.speculative, session.warm, session.menu = running(), running(), running(), running()
    session.start_edit(1, asyncio.sleep(60))
    session.start_edit_warm(asyncio.sleep(60))
    session.last = (Snapshot(buf=1, tick=1, row=0, col=0, first=0, lines=["secret = 1"]), "2")
    other.task = running()
    tasks = session.running()
    assert len(tasks) == 6
    core.forget(1)
    assert await wound_down(*tasks)
    assert 1 not in core.buffers and session.last is None
    assert not other.task.done()  # another buffer's request goes on
    assert core.state(1) is not session  # the buffer's next use starts afresh
    core.forget(99)  # a buffer nothing was kept for: nothing to do, nothing fails
    await core.close()


async def test_cancel_by_kind_stops_one_edit_or_all_of_them() -> None:
    core = Core(RecordingEditor())
    session = core.state(1)
    session.start_edit(1, asyncio.sleep(60))
    session.start_edit(2, asyncio.sleep(60))
    first, second = session.edits[1], session.edits[2]
    assert session.cancel("edit", edit_id=1) is True
    assert await wound_down(first) and not second.done()
    assert session.cancel("edit") is True
    assert await wound_down(second) and session.edits == {}
    await core.close()


async def test_a_pause_timer_is_no_request_in_flight_once_a_keystroke_cancels_it() -> None:
    core = Core(RecordingEditor())
    session = core.state(1)
    fired: list[int] = []
    session.pause = asyncio.get_running_loop().call_later(0.05, fired.append, 1)
    assert session.in_flight()["pauses"] == 1
    session.abort()
    await asyncio.sleep(0.1)
    assert fired == [] and session.in_flight()["pauses"] == 0
    await core.close()
