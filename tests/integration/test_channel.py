"""The worker's own msgpack-RPC channel to a real Neovim (python/local_copilot/nvim/channel.py):
events from Lua arrive, Lua sent back runs, invalid UTF-8 survives both ways, a closed
Neovim is noticed."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from local_copilot.ghost.render import RenderPlan, candidate
from local_copilot.nvim.channel import NvimChannel, split_address

from ..helpers import accepts, wait_for

pytestmark = pytest.mark.integration


async def until(cond: Any, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.01)


@pytest.fixture()
def listening_nvim(nvim_bin: str, tmp_path: Path) -> Any:
    addr = tmp_path / "nvim.sock"
    proc = subprocess.Popen([nvim_bin, "--clean", "--headless", "-n", "--listen", str(addr)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: accepts(addr), what=f"Neovim listening at {addr}")
    yield proc, addr
    proc.kill()
    proc.wait()


async def test_events_and_lua_both_ways(listening_nvim: Any) -> None:
    proc, addr = listening_nvim
    events: list[tuple[str, Any]] = []
    ready: list[NvimChannel] = []
    lost: list[bool] = []
    ch = await NvimChannel.open(str(addr), lambda n, p: events.append((n, p)), ready.append, lambda: lost.append(True))
    await until(lambda: ready)
    assert ready == [ch] and ch.connected and ch.id is not None and ch.id > 0

    # Lua's rpcnotify to this channel id is an event here, with its payload; a buffer line
    # with a byte that is not UTF-8 arrives as a lone surrogate (as through pynvim)
    ch.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'caf\\195\\169 \\255x' })\n"
           "vim.rpcnotify(..., 'local_copilot_event', 'snapshot', "
           "{ buf = 1, lines = vim.api.nvim_buf_get_lines(0, 0, -1, false) })", ch.id)
    await until(lambda: events)
    name, payload = events[0]
    assert name == "snapshot"
    assert payload == {"buf": 1, "lines": ["caf\u00e9 \udcffx"]}

    # ... and the same text sent back lands byte for byte
    ch.lua("vim.api.nvim_buf_set_lines(0, 1, 1, false, { ... })\n"
           "vim.rpcnotify(" + str(ch.id) + ", 'local_copilot_event', 'echo', "
           "vim.api.nvim_buf_get_lines(0, 0, -1, false))", payload["lines"][0])
    await until(lambda: len(events) == 2)
    assert events[1] == ("echo", ["caf\u00e9 \udcffx", "caf\u00e9 \udcffx"])

    # a render plan (a msgspec Struct) goes as a plain table
    plan = RenderPlan(buf=1, tick=3, row=0, col=2, seq=9, items=[candidate("foo bar")], final=True)
    ch.lua("vim.rpcnotify(" + str(ch.id) + ", 'local_copilot_event', 'plan', ...)", plan)
    await until(lambda: len(events) == 3)
    assert events[2][0] == "plan"
    assert events[2][1]["items"][0]["text"] == "foo bar" and events[2][1]["seq"] == 9

    # Lua that fails does not end the channel
    ch.lua("error('boom')")
    ch.lua("vim.rpcnotify(" + str(ch.id) + ", 'local_copilot_event', 'after')")
    await until(lambda: len(events) == 4)
    assert events[3] == ("after", None)
    assert not lost

    proc.kill()
    await until(lambda: lost)
    assert not ch.connected
    assert ch.lua("return 1") is False


async def test_no_server_at_the_address(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        await NvimChannel.open(str(tmp_path / "missing.sock"), lambda n, p: None, lambda c: None, lambda: None)


def test_address_forms() -> None:
    assert split_address("/run/user/1000/nvim.123.0") == "/run/user/1000/nvim.123.0"
    assert split_address("127.0.0.1:6666") == ("127.0.0.1", 6666)
    assert split_address("[::1]:6666") == ("::1", 6666)
    assert split_address("\\\\.\\pipe\\nvim-1") == "\\\\.\\pipe\\nvim-1"
