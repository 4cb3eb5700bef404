"""A second msgpack-RPC connection to Neovim, owned by the worker loop: the keystroke path.

Through the channel Neovim started the host on, every keystroke crosses three threads: pynvim's loop
reads the snapshot and runs the handler in a new greenlet, hands it to the worker loop, and
the render plan hops back to pynvim's loop to be written, with a thread wakeup at each hop.
Here the worker connects to Neovim's own server address
(`$NVIM`, v:servername), tells Lua its channel id, and Lua sends snapshots there: they are
read, turned into requests and answered with render plans on one thread, one event loop.

Only the notifications of the keystroke path use it. Sync calls (:checkhealth, status) stay on
the host's channel; when this connection is missing or lost, Lua goes back to that one.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import msgpack
import msgspec

from ..log import log

__all__ = ["NvimChannel", "split_address"]

# Neovim and pynvim pass invalid UTF-8 in buffer text through as lone surrogates
_UNICODE_ERRORS = "surrogateescape"
_REQUEST, _RESPONSE, _NOTIFICATION = 0, 1, 2
_API_INFO_ID = 1
EVENT_METHOD = "local_copilot_event"


def split_address(address: str) -> tuple[str, int] | str:
    """Neovim's server address: a socket path, or host:port for TCP."""
    if address.startswith(("/", ".", "\\\\")) or ":" not in address:
        return address
    host, _, port = address.rpartition(":")
    if port.isdigit():
        return host.strip("[]"), int(port)
    return address


class NvimChannel(asyncio.Protocol):
    """Connect with `open()`; events from Lua go to `on_event(name, payload)` on this loop,
    and `on_ready(channel)` is called once Neovim has told the channel its id.

    `lua(code, *args)` runs Lua in Neovim as a notification (no answer awaited); an error
    in it comes back as `nvim_error_event`, which is logged."""

    def __init__(self, on_event: Callable[[str, Any], None], on_ready: Callable[[NvimChannel], None],
                 on_lost: Callable[[], None]) -> None:
        self._on_event, self._on_ready, self._on_lost = on_event, on_ready, on_lost
        self._unpacker = msgpack.Unpacker(unicode_errors=_UNICODE_ERRORS, strict_map_key=False)
        self._packer = msgpack.Packer(unicode_errors=_UNICODE_ERRORS)
        # msgspec writes render plans (Structs) straight to msgpack, no to_builtins copy first
        self._encoder = msgspec.msgpack.Encoder()
        self._transport: asyncio.Transport | None = None
        self.id: int | None = None  # Neovim's channel id for this connection, once known

    @classmethod
    async def open(cls, address: str, on_event: Callable[[str, Any], None], on_ready: Callable[[NvimChannel], None],
                   on_lost: Callable[[], None], *, timeout: float = 2.0) -> NvimChannel:
        loop = asyncio.get_running_loop()
        where = split_address(address)
        async with asyncio.timeout(timeout):
            if isinstance(where, str):
                _, proto = await loop.create_unix_connection(lambda: cls(on_event, on_ready, on_lost), where)
            else:
                _, proto = await loop.create_connection(lambda: cls(on_event, on_ready, on_lost), *where)
        return proto

    @property
    def connected(self) -> bool:
        return self._transport is not None and self.id is not None

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # the answer carries this connection's channel id, which Lua needs to send here
        self._write([_REQUEST, _API_INFO_ID, "nvim_get_api_info", []])

    def data_received(self, data: bytes) -> None:
        self._unpacker.feed(data)
        for msg in self._unpacker:
            try:
                self._handle(msg)
            except Exception:  # one bad message must not end the channel
                log.exception("channel message failed")

    def connection_lost(self, exc: Exception | None) -> None:
        was = self.id
        self._transport, self.id = None, None
        if was is not None:
            log.info("Neovim channel %s closed (%s)", was, exc or "EOF")
        self._on_lost()

    # -- messages ----------------------------------------------------------------------------

    def _handle(self, msg: Any) -> None:
        kind = msg[0]
        if kind == _NOTIFICATION:
            method, params = msg[1], msg[2]
            if method == EVENT_METHOD and params:
                self._on_event(params[0], params[1] if len(params) > 1 else None)
            elif method == "nvim_error_event":
                log.warning("Lua call from the host failed: %s", params[1] if len(params) > 1 else params)
        elif kind == _RESPONSE:
            _, msgid, error, result = msg
            if msgid == _API_INFO_ID:
                if error is not None:
                    log.warning("nvim_get_api_info failed on the second channel: %s", error)
                    self.close()
                    return
                self.id = int(result[0])
                self._on_ready(self)
        elif kind == _REQUEST:  # Lua never asks this channel anything; answer so it never waits
            self._write([_RESPONSE, msg[1], f"local-copilot: no method {msg[2]!r} here", None])

    def _write(self, msg: list[Any]) -> None:
        if self._transport is not None:
            self._transport.write(self._packer.pack(msg))

    def lua(self, code: str, *args: Any) -> bool:
        """Run `code` with `args` in Neovim; False when the channel is down."""
        if self._transport is None or self._transport.is_closing():
            return False
        msg = [_NOTIFICATION, "nvim_exec_lua", [code, list(args)]]
        try:
            data = self._encoder.encode(msg)
        except (UnicodeEncodeError, TypeError):  # lone surrogates from buffer text: pynvim's way
            data = self._packer.pack(msgspec.to_builtins(msg))
        self._transport.write(data)
        return True

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
