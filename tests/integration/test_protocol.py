"""Lua and the host list the same events (lua/local_copilot/protocol.lua, python/local_copilot/
nvim/protocol.py) and the same updates (lua/local_copilot/updates.lua, updates.py), every
event Lua sends while used is one the host decodes, and every update the host sends while used
is one of the union."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from local_copilot import updates
from local_copilot.nvim import protocol

from ..helpers import wait_for
from .nvim_session import start_nvim


def test_lua_lists_the_events_the_host_decodes(nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
                                               llama_server: Any, tmp_path: Path) -> None:
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={"backends": {"llama.cpp": {"url": llama_server.url}},
                                                           "debounce_ms": 0})
    try:
        listed = nv.exec_lua("return vim.tbl_keys(require('local_copilot.protocol').events)")
        assert sorted(listed) == sorted(protocol.NAMES)
        assert sorted(nv.exec_lua("return require('local_copilot.updates').tags")) == sorted(updates.TAGS)
        # what Lua really sends, typing, accepting, leaving Insert mode and wiping the buffer
        nv.exec_lua("""
            local host = require('local_copilot.host')
            local emit = host.emit
            _G.SENT = {}
            host.emit = function(name, payload)
              _G.SENT[#_G.SENT + 1] = name
              return emit(name, payload)
            end
            local receive = require('local_copilot.updates').receive
            _G.RECEIVED = {}
            require('local_copilot.updates').receive = function(...)
              for i = 1, select('#', ...) do _G.RECEIVED[#_G.RECEIVED + 1] = select(i, ...) end
              return receive(...)
            end""")
        nv.command(f"edit {tmp_path / 'a.py'}")
        nv.input("ix = ")
        wait_for(lambda: nv.exec_lua("return require('local_copilot').is_visible()"), what="a suggestion")
        nv.exec_lua("require('local_copilot').accept()")
        nv.input("<Esc>")
        nv.command("bwipeout!")
        wait_for(lambda: "forget" in nv.exec_lua("return _G.SENT"), what="the forget event")
        sent = set(nv.exec_lua("return _G.SENT"))
        assert {"snapshot", "accepted", "forget"} <= sent and sent <= protocol.NAMES, sent
        received = [updates.decode(u) for u in nv.exec_lua("return _G.RECEIVED")]
        assert any(isinstance(u, updates.Render) and u.plan.items for u in received), received
        # the host's privacy rules reach the module that applies them
        assert any(isinstance(u, updates.PrivacyRules) for u in received), received
        assert nv.exec_lua("return require('local_copilot.privacy').has_rules()") is True
    finally:
        nv.close()
