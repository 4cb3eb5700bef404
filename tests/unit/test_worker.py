"""The worker thread: calls run on its loop, and on Linux it runs as SCHED_BATCH, so that
waking it (a snapshot from Neovim) never preempts Neovim's keystroke callback mid-way."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from local_copilot.nvim.worker import Worker


def test_calls_run_on_the_worker_thread_and_coroutines_return_their_result() -> None:
    worker = Worker()
    try:
        seen: list[int] = []
        done = threading.Event()
        worker.call(lambda: (seen.append(threading.get_ident()), done.set()))
        assert done.wait(5)
        assert seen == [worker.thread.ident]

        async def answer() -> int:
            return 42

        assert worker.run(answer(), timeout=5) == 42
    finally:
        worker.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_BATCH is Linux's")
def test_the_worker_thread_does_not_preempt_on_wakeup_and_the_caller_keeps_its_policy() -> None:
    before = os.sched_getscheduler(0)
    worker = Worker()
    try:
        async def policy() -> int:
            return os.sched_getscheduler(0)  # 0: the calling thread, the worker's

        assert worker.run(policy(), timeout=5) == os.SCHED_BATCH
        assert os.sched_getscheduler(0) == before  # only the worker thread changed
    finally:
        worker.stop()
