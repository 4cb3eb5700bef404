"""Shared test helpers: waiting on conditions (never bare sleeps), time constants, whether a
Unix socket accepts, the kernel's table of TCP sockets, and what a completion through one
server entry fails with."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from local_copilot.backends import FimRequest, make_backend
from local_copilot.config import load_config
from local_copilot.transport.access import async_client

T = TypeVar("T")

# One place for time limits; generous because these machines are noisy.
TIMEOUT = 15.0


def accepts(path: str | os.PathLike[str]) -> bool:
    """Whether something listens at the Unix socket `path` (the file exists once bound, a
    moment before the listen: a connect in between is refused)."""
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(os.fspath(path))
        except OSError:
            return False
    return True


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


class TcpSocket(NamedTuple):
    local_addr: str  # hex, as the kernel writes it (127.0.0.1 is 0100007F)
    local_port: int
    remote_port: int
    state: str  # hex: 01 ESTABLISHED, 08 CLOSE_WAIT, 0A LISTEN
    inode: str


def tcp_sockets() -> Iterator[TcpSocket]:
    """Every TCP socket on this machine, from /proc/net/tcp and /proc/net/tcp6."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            f = row.split()
            addr, port = f[1].rsplit(":", 1)
            yield TcpSocket(addr, int(port, 16), int(f[2].rsplit(":", 1)[1], 16), f[3], f[9])


async def first_failure(raw: dict[str, Any], name: str = "team", client_timeout: float = 5.0) -> Exception:
    """What one completion through the entry `name` of the options `raw` fails with: the
    error the user is told about. Fails the test if the completion goes through."""
    cfg = load_config(raw).backends[name]
    async with async_client([cfg], timeout=client_timeout) as client:
        backend = make_backend(name, cfg, client)
        try:
            async for _ in backend.complete(FimRequest(prefix="", middle="a = ", suffix="", n_predict=4)):
                pass
        except Exception as exc:  # noqa: BLE001  (the one the user is told about)
            return exc
        finally:
            backend.close()
    raise AssertionError("the request went through")
