"""Whose server is this? Before text goes to a server on this machine, the listening socket
must belong to the user: on a shared machine any user can listen on 127.0.0.1:8012 first and
receive everyone's buffers. The kernel records the uid that owns each socket (Linux): asked
over netlink (sock_diag, listening TCP sockets only), or read from /proc/net/tcp and tcp6 where
netlink is refused; elsewhere the check is skipped."""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ..errors import ForeignServer

__all__ = ["Listener", "check_peer", "listener_uids", "listeners"]

_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_LISTEN = "0A"
# a stream is opened per keystroke (a cancel closes one): the owner is asked at most this often
# per port. A port changes hands only after its server stopped, and the new one takes longer
# than this to load a model.
FRESH_S = 2.0
_seen: dict[int, tuple[float, set[int]]] = {}

# sock_diag (linux/sock_diag.h, linux/inet_diag.h): a dump of the TCP sockets in LISTEN state
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_DUMP_REQUEST = 0x1 | 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_TCP_LISTEN = 10
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, seq, pid
_SPORT = struct.Struct(">H")  # inet_diag_msg.id.idiag_sport, after family/state/timer/retrans
# inet_diag_msg.idiag_uid and idiag_inode: after the 48-byte id, expires and two queues
_UID_INODE = struct.Struct("=II")


class Listener(NamedTuple):
    uid: int
    inode: int  # /proc/PID/fd/N of the process holding it links to socket:[inode]


def listener_uids(port: int) -> set[int]:
    """The uids owning sockets that listen on `port` (any local address)."""
    return {lst.uid for lst in listeners(port)}


def listeners(port: int) -> set[Listener]:
    """The sockets that listen on `port` (any local address). The text tables list every
    socket of the machine (thousands in TIME_WAIT on a busy one: milliseconds to read);
    netlink hands over the listening ones only (tens of microseconds). Where netlink is
    refused, or tells of no listener (a sandbox may answer an empty dump), the tables answer."""
    try:
        found = _netlink_listeners(port)
    except (OSError, AttributeError, struct.error):
        found = set()
    return found or _table_listeners(port)


def _netlink_listeners(port: int) -> set[Listener]:
    found: set[Listener] = set()
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as sock:
        sock.settimeout(0.5)  # the kernel answers at once; never hold the worker loop
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), 1):
            for msg in _listening(sock, family, seq):
                if _SPORT.unpack_from(msg, 4)[0] == port:
                    found.add(Listener(*_UID_INODE.unpack_from(msg, 64)))
    return found


def _listening(sock: socket.socket, family: int, seq: int) -> Iterator[memoryview]:
    """The inet_diag_msg of each listening TCP socket of `family`."""
    # inet_diag_req_v2: family, protocol, ext, pad, states; a zero socket id (no filter)
    req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN) + bytes(48)
    sock.send(_HEADER.pack(_HEADER.size + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_DUMP_REQUEST, seq, 0) + req)
    while True:
        data = memoryview(sock.recv(65536))
        if not data:
            raise OSError("sock_diag closed")
        off = 0
        while off + _HEADER.size <= len(data):
            length, kind, _, _, _ = _HEADER.unpack_from(data, off)
            if kind == _NLMSG_DONE:
                return
            if kind == _NLMSG_ERROR or length < _HEADER.size:
                raise OSError("sock_diag refused the dump")
            yield data[off + _HEADER.size:off + length]
            off += (length + 3) & ~3


def _table_listeners(port: int) -> set[Listener]:
    found: set[Listener] = set()
    for table in _TABLES:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) < 10 or f[3] != _LISTEN:
                continue
            if int(f[1].rsplit(":", 1)[1], 16) == port:  # local address:port
                found.add(Listener(int(f[7]), int(f[9])))
    return found


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
