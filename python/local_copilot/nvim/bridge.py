"""The `Editor` port for Neovim: each of its methods builds one update (updates.py) and sends it
through `update()`, the one path from the host to Lua."""

from __future__ import annotations

import logging
import threading
from typing import Any

import msgspec
import pynvim

from ..ghost.render import RenderPlan
from ..instruct.runner import EditUpdate
from ..log import LEVELS, log
from ..transport.limits import clip_message
from .channel import NvimChannel
from .updates import (
    RECEIVE,
    BackendReady,
    BackendState,
    EditProgress,
    NextEditPlan,
    Notice,
    PrivacyRules,
    PrivacyVerdict,
    Render,
    Update,
)

__all__ = ["NvimEditor"]


class NvimEditor:
    """Called from the worker thread. While the worker's own channel to Neovim is up
    (channel.py) every update goes there at once, in order; otherwise it hops to pynvim's loop
    with the session's thread-safe call.

    On the pynvim path render plans are coalesced per buffer: while one hop is queued, newer
    plans replace the pending one, and the hop sends them all in one Lua call, so a fast stream
    costs one Lua call per loop turn, not one per token.
    """

    def __init__(self, nvim: pynvim.Nvim) -> None:
        self.nvim = nvim
        # the worker's channel (set and used on the worker thread only: asyncio transports
        # are not thread-safe)
        self.channel: NvimChannel | None = None
        self.worker_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending: dict[int, Render] = {}
        self._queued = False
        # pynvim's public async_call formats the caller's stack on every call (for its error
        # message), on every render plan. Updates take the session's
        # thread-safe hop directly; _flush and _later catch their own errors.
        session = getattr(nvim, "_session", None)
        self._hop = getattr(session, "threadsafe_call", None) or nvim.async_call

    def _direct(self) -> NvimChannel | None:
        channel = self.channel
        if channel is not None and channel.connected and threading.current_thread() is self.worker_thread:
            return channel
        return None

    def update(self, u: Update) -> None:
        """Tell Lua `u`, from any thread: on the worker's channel when it is up (encoded once,
        straight from the Struct), else on pynvim's loop."""
        channel = self._direct()
        if channel is not None and channel.lua(RECEIVE, u):
            return
        if isinstance(u, Render):
            self._coalesce(u)
            return
        self._hop(self._send_now, u)

    def _coalesce(self, u: Render) -> None:
        with self._lock:
            self._pending[u.plan.buf] = u
            if self._queued:
                return
            self._queued = True
        self._hop(self._flush)

    def _flush(self) -> None:
        with self._lock:
            renders = list(self._pending.values())
            self._pending.clear()
            self._queued = False
        try:
            self.nvim.exec_lua(RECEIVE, *msgspec.to_builtins(renders), async_=True)
        except Exception:  # Neovim went away; nothing to draw on
            log.debug("render plans not delivered", exc_info=True)

    def _send_now(self, u: Update) -> None:
        """On pynvim's loop, in the same queue as render plans (so a state change and the
        plan after it arrive in that order)."""
        try:
            self.nvim.exec_lua(RECEIVE, msgspec.to_builtins(u), async_=True)
        except Exception:  # Neovim went away
            log.debug("update not delivered", exc_info=True)

    # -- the Editor port (ghost/engine.py): one update each ------------------------------------

    def show(self, plan: RenderPlan) -> None:
        self.update(Render(plan=plan))

    def notify(self, message: str, level: str) -> None:
        # a server's words may be in it: bounded, no control characters (limits.py)
        message = clip_message(message)
        # the editor shows one line that fits its command line (message.lua): the whole text
        # is here, at warning level at least so that the default log level keeps it
        log.log(max(logging.WARNING, LEVELS.get(level, logging.WARNING)), "shown (%s): %s", level, message)
        self.update(Notice(message=message, level=level))

    def backend_state(self, state: str, message: str) -> None:
        self.update(BackendState(state=state, message=clip_message(message)))  # type: ignore[arg-type]

    def private(self, buf: int, path: str, reason: str | None, kind: str) -> None:
        self.update(PrivacyVerdict(buf=buf, path=path, reason=reason, kind=kind))

    def privacy_rules(self, rules: list[list[str]]) -> None:
        self.update(PrivacyRules(rules=rules))

    def show_next_edit(self, plan: dict[str, Any]) -> None:
        self.update(msgspec.convert(plan, NextEditPlan))

    def edit_update(self, update: EditUpdate) -> None:
        """An instruction edit's preview or outcome (pure data; lua/local_copilot/edit.lua)."""
        if update.message:
            update = msgspec.structs.replace(update, message=clip_message(update.message))
        self.update(EditProgress(update=update))

    def backend_ready(self, name: str) -> None:
        self.update(BackendReady(backend=name))
