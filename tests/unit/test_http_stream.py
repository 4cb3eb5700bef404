"""StreamClient against a FAKE loopback HTTP server on its own thread: a quick answer awaited
in poll() (wait_s) arrives whole and keeps the connection; a slow one is awaited through the
event loop after at most wait_s, and the loop runs meanwhile."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from local_copilot.transport.http_stream import StreamClient


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as llama-server answers unstreamed requests
    delay_s = 0.0
    peers: list[Any] = []
    closed: list[Any] = []  # connections this server has closed

    def finish(self) -> None:
        super().finish()
        type(self).closed.append(self.client_address)

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).peers.append(self.client_address)
        time.sleep(type(self).delay_s)
        answer = b'{"echo": ' + body + b"}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the client aborts its kept connection at the end (RST): expected here


@pytest.fixture()
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"delay_s": 0.0, "peers": [], "closed": []})
    srv = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", handler
    srv.shutdown()
    srv.server_close()


async def _post(client: StreamClient, url: str, body: bytes, wait_s: float) -> bytes:
    async with await client.post(url + "/completion", body, {}, wait_s=wait_s) as response:
        assert response.status == 200
        return await response.read()


async def test_a_quick_answer_awaited_in_poll_arrives_whole_and_keeps_the_connection(server: Any) -> None:
    url, handler = server
    client = StreamClient(timeout=5)
    assert await _post(client, url, b'"one"', wait_s=1.0) == b'{"echo": "one"}'
    assert await _post(client, url, b'"two"', wait_s=1.0) == b'{"echo": "two"}'
    assert handler.peers[0] == handler.peers[1]  # the same connection, kept
    client.close()


async def test_a_slow_answer_is_awaited_through_the_loop_after_wait_s(server: Any) -> None:
    url, handler = server
    handler.delay_s = 1.0
    client = StreamClient(timeout=5)
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    task = asyncio.get_running_loop().create_task(ticker())
    await asyncio.sleep(0.02)
    started = time.monotonic()
    assert await _post(client, url, b'"slow"', wait_s=0.02) == b'{"echo": "slow"}'
    task.cancel()
    # the loop was held for wait_s only: the ticker ran on while the server took its 1 s
    during = [t for t in ticks if t > started]
    assert len(during) >= 5
    assert max(b - a for a, b in zip(during, during[1:])) < 0.5
    client.close()


async def test_a_kept_connection_the_server_closed_is_replaced_at_once(server: Any) -> None:
    """Within TRUSTED_IDLE_S a kept connection is used without peeking first: one the server
    closed meanwhile (its idle timeout, a restart) fails at the first read, and the same
    request goes out again on a fresh connection."""
    url, handler = server
    handler.timeout = 0.1  # the server drops a connection idle for 0.1 s
    client = StreamClient(timeout=5)
    assert await _post(client, url, b'"one"', wait_s=1.0) == b'{"echo": "one"}'
    deadline = time.monotonic() + 5
    while not handler.closed and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert handler.closed == [handler.peers[0]]
    assert StreamClient.TRUSTED_IDLE_S > 0.5  # so the dead connection was not peeked at
    assert await _post(client, url, b'"two"', wait_s=1.0) == b'{"echo": "two"}'
    assert len(handler.peers) == 2 and handler.peers[1] != handler.peers[0]
    client.close()


async def test_a_request_bigger_than_the_socket_buffer_is_sent_whole(server: Any) -> None:
    """A quick request is first sent without waiting; what the socket's buffer does not take
    then goes through the loop (a prompt of a few MB, a fresh connection's small buffer)."""
    url, handler = server
    client = StreamClient(timeout=10)
    body = b'"' + b"x" * (4 << 20) + b'"'
    assert await _post(client, url, body, wait_s=0.05) == b'{"echo": ' + body + b"}"
    client.close()


async def test_post_now_gives_a_plain_answer_as_bytes_and_keeps_the_connection(server: Any) -> None:
    url, handler = server
    client = StreamClient(timeout=5)
    assert client.post_now(url + "/completion", b'"zero"', {}, 1.0, whole=True) is None  # no kept connection yet
    assert await _post(client, url, b'"one"', wait_s=1.0) == b'{"echo": "one"}'
    got = client.post_now(url + "/completion", b'"two"', {}, 1.0, whole=True)
    assert got == b'{"echo": "two"}'
    assert await _post(client, url, b'"three"', wait_s=1.0) == b'{"echo": "three"}'
    assert handler.peers == [handler.peers[0]] * 3  # one connection, kept through all three
    client.close()


async def test_post_now_leaves_a_late_answer_in_flight_and_finish_reads_it(server: Any) -> None:
    url, handler = server
    client = StreamClient(timeout=5)
    assert await _post(client, url, b'"one"', wait_s=1.0) == b'{"echo": "one"}'
    handler.delay_s = 0.2
    sent = client.post_now(url + "/completion", b'"late"', {}, 0.02, whole=True)
    assert not isinstance(sent, (bytes, type(None)))  # still on its way after 20 ms
    async with await client.finish(sent) as response:  # type: ignore[arg-type]
        assert response.status == 200 and await response.read() == b'{"echo": "late"}'
    assert len(handler.peers) == 2 and handler.peers[1] == handler.peers[0]  # sent once, on the kept one
    client.close()


@pytest.mark.parametrize("head, plain", [  # True: b"{}"; an int: bytes still to come
    (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", True),
    (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}", True),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n{}", 1),  # a byte still to come
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP", False),  # bytes past it
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", False),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", False),
    (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 2\r\n\r\n{}", False),
    (b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\n\r\n{}", False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", False),
])
def test_only_a_plain_whole_answer_skips_the_response_parse(head: bytes, plain: bool | int) -> None:
    from local_copilot.transport.http_stream import _plain_body

    buf = bytearray(head)
    got = _plain_body(buf, buf.find(b"\r\n\r\n"))
    assert got == (b"{}" if plain is True else None if plain is False else plain)


async def test_post_now_gives_up_on_a_connection_reset_between_head_and_body(server: Any) -> None:
    import socket as socket_mod

    url, handler = server
    client = StreamClient(timeout=5)
    assert await _post(client, url, b'"one"', wait_s=1.0) == b'{"echo": "one"}'

    def cut(self: Any) -> None:  # the head and half the body, then a reset
        self.rfile.read(int(self.headers["Content-Length"]))
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a")
        self.wfile.flush()
        time.sleep(0.05)
        self.rfile.close()  # the files hold the socket open: closed first, the close below is real
        self.wfile.close()
        self.connection.setsockopt(socket_mod.SOL_SOCKET, socket_mod.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        self.connection.close()  # with linger 0: a reset, not an end

    handler.do_POST = cut  # type: ignore[method-assign]
    assert client.post_now(url + "/completion", b'"two"', {}, 1.0, whole=True) is None  # no OSError
    assert client._idle.get(next(iter(client._idle))) == []  # the broken connection is not kept
    client.close()
