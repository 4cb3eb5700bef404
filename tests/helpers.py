"""Shared test helpers: waiting on conditions (never bare sleeps) and time constants."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# One place for time limits; generous because these machines are noisy.
TIMEOUT = 15.0


def wait_for(fn: Callable[[], T], *, timeout: float = TIMEOUT, interval: float = 0.02, what: str = "") -> T:
    """Poll `fn` until it returns something truthy; fail with the last value seen."""
    deadline = time.monotonic() + timeout
    last: T = fn()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or fn}: last value {last!r}")
        time.sleep(interval)
        last = fn()
    return last
