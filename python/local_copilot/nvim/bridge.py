"""The `Editor` port for Neovim: render plans and notifications go to Lua in one call each."""

from __future__ import annotations

import threading
from typing import Any

import msgspec
import pynvim

from ..log import log
from ..render import RenderPlan

__all__ = ["NvimEditor"]


class NvimEditor:
    """Called from the worker thread; hops to pynvim's loop with `async_call`.

    Plans are coalesced per buffer: while one hop is queued, newer plans replace the pending
    one, so a fast stream costs one Lua call per loop turn, not one per token.
    """

    def __init__(self, nvim: pynvim.Nvim) -> None:
        self.nvim = nvim
        self._lock = threading.Lock()
        self._pending: dict[int, RenderPlan] = {}
        self._queued = False
        # pynvim's public async_call formats the caller's stack on every call (for its error
        # message): ~100 us of host CPU per render plan (bench/run.py, py-spy). Plans take the
        # session's thread-safe hop directly; _flush catches its own errors.
        session = getattr(nvim, "_session", None)
        self._hop = getattr(session, "threadsafe_call", None) or nvim.async_call

    def show(self, plan: RenderPlan) -> None:
        with self._lock:
            self._pending[plan.buf] = plan
            if self._queued:
                return
            self._queued = True
        self._hop(self._flush)

    def _flush(self) -> None:
        with self._lock:
            plans = list(self._pending.values())
            self._pending.clear()
            self._queued = False
        try:
            for plan in plans:
                self.nvim.exec_lua(
                    "require('local_copilot.ghost').show(...)", msgspec.to_builtins(plan), async_=True
                )
        except Exception:  # Neovim went away; nothing to draw on
            log.debug("render plan not delivered", exc_info=True)

    def _later(self, fn: Any, *args: Any) -> None:
        """Run on pynvim's loop, in the same queue as render plans (so a state change and the
        plan after it arrive in that order)."""
        def run() -> None:
            try:
                fn(*args)
            except Exception:  # Neovim went away
                log.debug("editor call not delivered", exc_info=True)
        self._hop(run)

    def notify(self, message: str, level: str) -> None:
        self._later(self._notify_now, message, level)

    def _notify_now(self, message: str, level: str) -> None:
        self.nvim.exec_lua("require('local_copilot').notify(...)", message, level, async_=True)

    def backend_state(self, state: str, message: str) -> None:
        self._later(lambda: self.nvim.exec_lua("require('local_copilot')._backend_state(...)", state, message,
                                               async_=True))

    def backend_ready(self, name: str) -> None:
        self.nvim.async_call(lambda: self.nvim.exec_lua(
            "vim.api.nvim_exec_autocmds('User', { pattern = 'LocalCopilotBackendReady', modeline = false, data = { backend = ... } })",
            name, async_=True))

    def call_lua(self, code: str, *args: Any) -> None:
        self.nvim.async_call(lambda: self.nvim.exec_lua(code, *args, async_=True))
