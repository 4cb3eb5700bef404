"""Loopback ports: a free one for a server, whether a given one is free, and which process
holds it when it is not (the supervisor names it rather than start a second server there)."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from ..transport.owner import listeners

__all__ = ["free_port", "port_free", "port_owner"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    """Can we bind 127.0.0.1:port? (Also catches a bound socket that is not listening yet,
    which is what vLLM holds while it loads.)"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def port_owner(port: int) -> str:
    """'pid 123 (python3)' for the process listening on `port`, when /proc shows it; else ''."""
    inodes = {f"socket:[{lst.inode}]" for lst in listeners(port)}
    if not inodes:
        return ""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    comm = (proc / "comm").read_text().strip()
                    return f"pid {proc.name} ({comm})"
        except OSError:
            continue
    return ""
