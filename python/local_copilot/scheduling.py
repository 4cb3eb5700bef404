"""The CPU scheduling policy of the calling thread: the host's worker runs batch (so waking it
never preempts Neovim's keystroke callback: nvim/worker.py), a model server's janitor normal
(servers/janitor.py)."""

from __future__ import annotations

import contextlib
import os

__all__ = ["set_scheduling"]


def set_scheduling(policy: str) -> None:
    """Run the calling thread (and what it starts later) under `policy` ("SCHED_BATCH",
    "SCHED_OTHER"); where the platform has no such policy or refuses, nothing changes."""
    value = getattr(os, policy, None)
    if value is None:
        return
    with contextlib.suppress(OSError):  # the default policy works too
        os.sched_setscheduler(0, value, os.sched_param(0))  # 0: the calling thread
