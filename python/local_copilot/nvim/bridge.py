"""The `Editor` port for Neovim (updates.py): `update()` is the one path from the host to Lua."""

from __future__ import annotations

import logging
import threading

import msgspec
import pynvim

from ..log import LEVELS, log
from ..transport.limits import clip_message
from ..updates import BackendState, EditProgress, Notice, Render, Update
from .channel import NvimChannel

# the one Lua function the host calls; it takes one update or several
RECEIVE = "require('local_copilot.updates').receive(...)"

__all__ = ["RECEIVE", "NvimEditor"]


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
        straight from the Struct), else on pynvim's loop. What the text of a message may hold
        of a server's words is bounded first (`_bounded`)."""
        if not isinstance(u, Render):
            u = _bounded(u)
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


def _bounded(u: Update) -> Update:
    """`u` with a server's words in its message bounded, without control characters (limits.py).
    A notice is logged whole: the editor shows one line that fits its command line
    (message.lua), and the log keeps it at warning level at least, which the default log level
    keeps."""
    if isinstance(u, Notice):
        message = clip_message(u.message)
        log.log(max(logging.WARNING, LEVELS.get(u.level, logging.WARNING)), "shown (%s): %s", u.level, message)
        return msgspec.structs.replace(u, message=message)
    if isinstance(u, BackendState):
        return msgspec.structs.replace(u, message=clip_message(u.message))
    if isinstance(u, EditProgress) and u.update.message:
        return EditProgress(update=msgspec.structs.replace(u.update, message=clip_message(u.update.message)))
    return u
