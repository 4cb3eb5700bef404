"""What runs once the host is used: the worker loop, the editor port, the core and the backend
switcher, built together (so none is there without the others)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pynvim

from .. import updates
from ..core import Core
from ..servers.backend_manager import BackendManager, Change
from .bridge import NvimEditor
from .worker import Worker

if TYPE_CHECKING:
    from .lsp_requests import LspRequests

__all__ = ["Running"]


class Running:
    def __init__(self, nvim: pynvim.Nvim, use_config: Callable[[Change], None],
                 start_hint: Callable[[str], str | None]) -> None:
        self.editor = NvimEditor(nvim)
        self.worker = Worker()
        self.editor.worker_thread = self.worker.thread
        self.core = Core(self.editor, start_hint)
        self.backends = BackendManager(updates.notices(self.editor), use_config,
                                       lambda name: self.editor.update(updates.BackendReady(backend=name)))
        self._lsp: LspRequests | None = None

    @property
    def lsp(self) -> LspRequests:
        """The in-process language server's requests (lsp.lua), built at the first: lsprotocol
        takes longer to import than the rest of the host, and only `lsp = true` needs it."""
        if self._lsp is None:
            from .lsp_requests import LspRequests

            self._lsp = LspRequests(self.core, self.editor)
        return self._lsp
