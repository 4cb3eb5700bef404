"""The owner check of a server on this machine (python/local_copilot/transport/owner.py), with real
sockets: one of this user's, one of another user's (a process started as `nobody`)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from local_copilot.transport import owner
from local_copilot.transport.http_stream import StreamClient
from local_copilot.transport.limits import CappedTransport
from local_copilot.transport.owner import ForeignServer, check_peer, listener_uids

from ..conftest import NOBODY


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    owner._seen.clear()
    yield
    owner._seen.clear()


def test_a_listener_of_mine_passes() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert listener_uids(port) == {os.getuid()}
        check_peer("127.0.0.1", port)
        check_peer("localhost", port)


def test_netlink_and_the_text_tables_say_the_same(foreign_port: int) -> None:
    """The owner is asked over netlink; where that is refused the text tables answer, alike."""
    with socket.socket() as mine, socket.socket(socket.AF_INET6) as mine6:
        mine.bind(("127.0.0.1", 0))
        mine.listen()
        mine6.bind(("::1", 0))
        mine6.listen()
        for port, uid in ((mine.getsockname()[1], os.getuid()), (mine6.getsockname()[1], os.getuid()),
                          (foreign_port, NOBODY)):
            found = owner._netlink_listeners(port)
            assert found == owner._table_listeners(port) and {lst.uid for lst in found} == {uid}
    with socket.socket() as idle:  # bound, not listening
        idle.bind(("127.0.0.1", 0))
        assert owner._netlink_listeners(idle.getsockname()[1]) == set()


@pytest.mark.parametrize("netlink", ["refused", "empty"])
def test_netlink_refused_or_silent_falls_back_to_the_text_tables(monkeypatch: Any, foreign_port: int,
                                                                 netlink: str) -> None:
    def answer(port: int) -> set[owner.Listener]:
        if netlink == "refused":
            raise PermissionError("netlink refused")
        return set()  # a sandbox's empty dump
    monkeypatch.setattr(owner, "_netlink_listeners", answer)
    with pytest.raises(ForeignServer):
        check_peer("127.0.0.1", foreign_port)


def test_another_users_listener_is_refused_by_name(foreign_port: int) -> None:
    assert listener_uids(foreign_port) == {NOBODY}
    with pytest.raises(ForeignServer, match=f"belongs to another user \\(uid {NOBODY}\\)"):
        check_peer("127.0.0.1", foreign_port)
    check_peer("10.0.0.1", foreign_port)  # not this machine: not this check's business


async def test_no_completion_stream_and_no_probe_reach_another_users_server(foreign_port: int) -> None:
    client = StreamClient(timeout=2)
    try:
        with pytest.raises(ForeignServer):
            await client.post(f"http://127.0.0.1:{foreign_port}/completion", b'{"prompt": "secret code"}', {})
    finally:
        client.close()
    async with httpx.AsyncClient(transport=CappedTransport()) as probe:
        with pytest.raises(ForeignServer):
            await probe.get(f"http://127.0.0.1:{foreign_port}/props")


def test_the_tables_are_read_at_most_every_fresh_s(monkeypatch: Any) -> None:
    reads: list[int] = []
    monkeypatch.setattr(owner, "listener_uids", lambda port: reads.append(port) or set())
    for _ in range(50):
        check_peer("127.0.0.1", 8012)
    assert reads == [8012]
    later = time.monotonic() + owner.FRESH_S + 1
    monkeypatch.setattr(owner.time, "monotonic", lambda: later)
    check_peer("127.0.0.1", 8012)
    assert reads == [8012, 8012]
