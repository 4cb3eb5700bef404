"""The requests of Neovim's in-process language server (lua/local_copilot/lsp.lua), answered on
the worker loop through the same pipeline as ghost text (lsp/suggest.py) and made into items
by lsp/items.py, as the stdio server does.

Lua sends each request with the snapshot it took of the buffer (the same fields as a ghost-text
snapshot) and gets the answer as an `LspAnswer` update. A newer request of the same buffer, or
Lua's `$/cancelRequest`, cancels the one still running (and with it its server request). The
running request is the buffer's (`Session.menu`, ghost/session.py): a wiped buffer (`Core.forget`) cancels
it too, as everything else in flight there.

A request may reach the host before its options: Lua sends the options first, but on the
worker's own channel once it is connected, while requests go on the host's channel (a host
started by a sync call, such as `:LocalCopilot status`, has had none). A request waits for them,
up to OPTIONS_WAIT_S, and is then answered as any other.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import msgspec
from lsprotocol import converters, types

from ..core import Core
from ..log import log
from ..lsp.items import completion_list, inline_list
from ..lsp.suggest import suggestions
from ..snapshot import Snapshot
from ..updates import Editor, LspAnswer

__all__ = ["OPTIONS_WAIT_S", "LspRequest", "LspRequests"]

_CONVERTER = converters.get_converter()

OPTIONS_WAIT_S = 5.0
_OPTIONS_POLL_S = 0.01  # the core has no signal for new options; the wait looks this often


class LspRequest(msgspec.Struct, kw_only=True):
    """One request from lsp.lua: `method` 'completion' or 'inline'; the cursor as LSP sends it
    (`line`, `character`) for the items' ranges, and as Neovim counts it in the snapshot."""

    id: int
    method: str
    invoked: bool = False
    line: int = 0
    character: int = 0
    indent: str = ""
    snapshot: Snapshot | None = None


class LspRequests:
    """The requests running, one per buffer (a newer one supersedes it); each is answered
    once, when its task ends."""

    def __init__(self, core: Core, editor: Editor) -> None:
        self.core = core
        self.editor = editor
        self.running: dict[int, asyncio.Task[Any]] = {}  # request id -> its task
        self.answered = 0  # tests: requests answered

    def request(self, req: LspRequest) -> None:
        """On the worker loop."""
        snap = req.snapshot
        if snap is None:
            self._answer(req.id, None)
            return
        state = self.core.state(snap.buf)
        state.cancel("menu")
        task = asyncio.get_running_loop().create_task(self._run(req, snap))
        task.add_done_callback(functools.partial(self._ended, req.id))
        state.menu = self.running[req.id] = task

    def cancel(self, req_id: int) -> None:
        task = self.running.get(req_id)
        if task is not None:
            task.cancel()

    async def _run(self, req: LspRequest, snap: Snapshot) -> Any:
        await self._options()
        texts = await suggestions(self.core, snap, req.invoked)
        position = types.Position(line=req.line, character=req.character)
        if req.method == "inline":
            return _CONVERTER.unstructure(inline_list(texts, position))
        # Neovim's client takes snippets and puts the cursor line's indentation before later
        # lines of one (vim.snippet): the text goes relative to it, measured at the buffer's tabstop
        return _CONVERTER.unstructure(completion_list(texts, position, indent=req.indent, language=snap.ft,
                                                      snippets=True, adjusts=True, tabstop=snap.ts))

    def _ended(self, req_id: int, task: asyncio.Task[Any]) -> None:
        """Every request is answered once its task ends, however it ends: the client waits on
        it (a request cancelled before its task ran, or a bug in it, gets nothing to offer)."""
        self.running.pop(req_id, None)
        result: Any = None
        if not task.cancelled():
            exc = task.exception()
            if exc is None:
                result = task.result()
            else:
                log.error("language server request %s failed", req_id, exc_info=exc)
        self._answer(req_id, result)

    async def _options(self) -> None:
        """Until the core has options, OPTIONS_WAIT_S at most (bad options leave it without)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + OPTIONS_WAIT_S
        while self.core.config is None and loop.time() < deadline:
            await asyncio.sleep(_OPTIONS_POLL_S)

    def _answer(self, req_id: int, result: Any) -> None:
        self.answered += 1
        self.editor.update(LspAnswer(id=req_id, result=result))
