"""The `Editor` port for Neovim: render plans and notifications go to Lua in one call each."""

from __future__ import annotations

import logging
import threading
from typing import Any

import msgspec
import pynvim

from ..transport.limits import clip_message
from ..log import LEVELS, log
from ..instruct.runner import EditUpdate
from .protocol import (LUA_BACKEND_READY, LUA_BACKEND_STATE, LUA_EDIT_UPDATE, LUA_NEXT_EDIT_SHOW, LUA_NOTIFY,
                        LUA_PRIVACY_RULES, LUA_PRIVACY_VERDICT, LUA_SHOW)
from ..ghost.render import RenderPlan
from .channel import NvimChannel

__all__ = ["NvimEditor"]


class NvimEditor:
    """Called from the worker thread. While the worker's own channel to Neovim is up
    (channel.py) everything goes there at once, in order; otherwise it hops to pynvim's loop
    with `async_call`.

    On the pynvim path plans are coalesced per buffer: while one hop is queued, newer plans
    replace the pending one, so a fast stream costs one Lua call per loop turn, not one per token.
    """

    def __init__(self, nvim: pynvim.Nvim) -> None:
        self.nvim = nvim
        # the worker's channel (set and used on the worker thread only: asyncio transports
        # are not thread-safe)
        self.channel: NvimChannel | None = None
        self.worker_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending: dict[int, RenderPlan] = {}
        self._queued = False
        # pynvim's public async_call formats the caller's stack on every call (for its error
        # message), a tenth of the host's budget per render plan. Plans take the session's
        # thread-safe hop directly; _flush catches its own errors.
        session = getattr(nvim, "_session", None)
        self._hop = getattr(session, "threadsafe_call", None) or nvim.async_call

    def _direct(self) -> NvimChannel | None:
        channel = self.channel
        if channel is not None and channel.connected and threading.current_thread() is self.worker_thread:
            return channel
        return None

    def lua(self, code: str, *args: Any) -> None:
        """Run Lua in Neovim without waiting, from any thread."""
        channel = self._direct()
        if channel is None or not channel.lua(code, *args):
            self._later(lambda: self.nvim.exec_lua(code, *args, async_=True))

    def show(self, plan: RenderPlan) -> None:
        channel = self._direct()
        if channel is not None and channel.lua(LUA_SHOW, plan):
            return
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
                self.nvim.exec_lua(LUA_SHOW, msgspec.to_builtins(plan), async_=True)
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
        # a server's words may be in it: bounded, no control characters (limits.py)
        message = clip_message(message)
        # the editor shows one line that fits its command line (message.lua): the whole text
        # is here, at warning level at least so that the default log level keeps it
        log.log(max(logging.WARNING, LEVELS.get(level, logging.WARNING)), "shown (%s): %s", level, message)
        self.lua(LUA_NOTIFY, message, level)

    def backend_state(self, state: str, message: str) -> None:
        self.lua(LUA_BACKEND_STATE, state, clip_message(message))

    def private(self, buf: int, path: str, reason: str | None, kind: str) -> None:
        self.lua(LUA_PRIVACY_VERDICT, buf, path, reason, kind)

    def privacy_rules(self, rules: list[list[str]]) -> None:
        self.lua(LUA_PRIVACY_RULES, rules)

    def show_next_edit(self, plan: dict[str, Any]) -> None:
        self.lua(LUA_NEXT_EDIT_SHOW, plan)

    def edit_update(self, update: EditUpdate) -> None:
        """An instruction edit's preview or outcome (pure data; lua/local_copilot/edit.lua)."""
        if update.message:
            update = msgspec.structs.replace(update, message=clip_message(update.message))
        channel = self._direct()
        if channel is not None and channel.lua(LUA_EDIT_UPDATE, update):
            return
        self._later(lambda: self.nvim.exec_lua(LUA_EDIT_UPDATE, msgspec.to_builtins(update), async_=True))

    def backend_ready(self, name: str) -> None:
        self.lua(LUA_BACKEND_READY, name)
