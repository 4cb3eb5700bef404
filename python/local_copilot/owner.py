"""Whose server is this? Before text goes to a server on this machine, the listening socket
must belong to the user: on a shared machine any user can listen on 127.0.0.1:8012 first and
receive everyone's buffers. The kernel's socket tables (/proc/net/tcp and tcp6, Linux) record
the uid that owns each socket; elsewhere the check is skipped."""

from __future__ import annotations

import ipaddress
import os
import time
from pathlib import Path

from .errors import ForeignServer

__all__ = ["check_peer", "listener_uids"]

_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_LISTEN = "0A"
# a stream is opened per keystroke (a cancel closes one): the tables, hundreds of lines on a
# busy machine, are read at most this often per port. A port changes hands only after its
# server stopped, and the new one takes longer than this to load a model.
FRESH_S = 2.0
_seen: dict[int, tuple[float, set[int]]] = {}


def listener_uids(port: int) -> set[int]:
    """The uids owning sockets that listen on `port` (any local address)."""
    uids: set[int] = set()
    for table in _TABLES:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) < 8 or f[3] != _LISTEN:
                continue
            local = f[1]
            if int(local.rsplit(":", 1)[1], 16) == port:
                uids.add(int(f[7]))
    return uids


def check_peer(host: str, port: int) -> None:
    """Raise ForeignServer when `host` is this machine and what listens on `port` is not the
    user's. Nothing listening, or no socket table to read: no opinion (the connect says)."""
    if not hasattr(os, "getuid"):
        return
    try:
        loopback = ipaddress.ip_address(host.strip("[]").split("%")[0]).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        return
    me = os.getuid()
    now = time.monotonic()
    seen = _seen.get(port)
    if seen is None or now - seen[0] > FRESH_S:
        seen = _seen[port] = (now, listener_uids(port))
    others = sorted(uid for uid in seen[1] if uid != me)
    if others:
        raise ForeignServer(
            f"the server at {host}:{port} belongs to another user (uid {others[0]}), not to you: nothing is sent "
            f"to it; stop it or use another port (:checkhealth local_copilot)")
