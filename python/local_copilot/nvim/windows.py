"""The snapshot windows Lua sent, per buffer, and the order snapshots reach the core in.

Lua owns the window: it reads the buffer, picks the window's rows and decides when to send it
whole. While the user types on one line it sends that line only (`base` = the seq of the last
whole window it sent): the window per keystroke would cost Neovim and the host a decode of
~260 lines each. The host keeps the last whole window of each buffer exactly as sent (every
one, answered or not) and only applies that line to it; it decides nothing about the window.
Lua sends the window whole again to a new host and after a channel switch; a base missing here
all the same (a message lost) makes the host ask for it (`Resync`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..log import log
from ..snapshot import Snapshot
from . import protocol

__all__ = ["Windows"]


class Windows:
    """Each buffer's last whole window and newest seq, read on the thread the message came on
    (`read`, `forget`), and the newest seq handed to the core, on the worker loop (`in_order`,
    `forget_order`)."""

    def __init__(self) -> None:
        self._windows: dict[int, Snapshot] = {}  # buf -> the last whole snapshot window
        self._seqs: dict[int, int] = {}  # buf -> the newest snapshot seq read
        self._submitted: dict[int, int] = {}  # buf -> the newest seq given to the core (worker loop)

    def read(self, msg: protocol.SnapshotMsg, resync: Callable[[int], None]) -> Snapshot | None:
        """The engine's snapshot of a snapshot message; None when it is older than one read
        already, or names a base window not kept here (then `resync(buf)` asks Lua for it)."""
        buf, seq = msg.buf, msg.seq
        if seq < self._seqs.get(buf, 0):
            # the same Lua sent a newer one already: it came first on the worker's channel
            # while this one waited on the host's (only while Lua switches channels)
            return None
        self._seqs[buf] = seq
        if msg.base is None:
            snap = protocol.to_snapshot(msg, msg.lines or [""])
            self._windows[buf] = snap
            return snap
        base = self._windows.get(buf)
        if base is None or base.seq != msg.base or msg.first != base.first or msg.line is None:
            log.info("buffer %s: no window %s here for snapshot %s; asking for it whole", buf, msg.base, seq)
            resync(buf)
            return None
        lines = list(base.lines)
        lines[msg.row - base.first] = msg.line
        return protocol.to_snapshot(msg, lines)

    def in_order(self, snap: Snapshot) -> bool:
        """On the worker loop: whether `snap` is no older than the buffer's last one handed to
        the core (and so is handed on). `read` drops an older one as it is read, but one read
        on the host's channel reaches the worker loop a hop later, maybe after a newer one read
        on the worker's own channel (only while Lua switches channels): it would cancel the
        newer one's request."""
        if snap.seq < self._submitted.get(snap.buf, 0):
            return False
        self._submitted[snap.buf] = snap.seq
        return True

    def forget(self, buf: int) -> None:
        """The buffer was wiped: its window and seq are of no use."""
        self._windows.pop(buf, None)
        self._seqs.pop(buf, None)

    def forget_order(self, buf: int) -> None:
        """On the worker loop, after the snapshots queued before the wipe: the buffer's next
        snapshot is handed on whatever its seq."""
        self._submitted.pop(buf, None)

    def buffers(self) -> set[int]:
        """The buffers a window is kept for."""
        return set(self._windows)
