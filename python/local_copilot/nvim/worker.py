"""A background thread with its own asyncio loop: all network I/O happens here.

pynvim's handler thread only hands values over (`call`); nothing there waits on the network.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from ..scheduling import set_scheduling

__all__ = ["Worker", "set_scheduling"]


class Worker:
    def __init__(self, name: str = "local-copilot-worker") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        # SCHED_BATCH: the same CPU share, but waking up this thread does not preempt a
        # running one. A snapshot Neovim writes to the host wakes it at once, and the kernel
        # would often run it right away on Neovim's core, stopping Neovim's keystroke
        # callback mid-way for the host's work (`make bench`: Neovim main thread per key).
        # Batch, it runs on the other core, or once Neovim's callback is done.
        set_scheduling("SCHED_BATCH")
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the worker loop, soon; thread-safe, never blocks."""
        self.loop.call_soon_threadsafe(fn, *args)

    def run(self, coro: Any, timeout: float | None = None) -> Any:
        """Run a coroutine on the worker and wait for its result (for sync RPC like health)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=2)
