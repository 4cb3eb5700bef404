"""Instruction edits on llama-server: the OpenAI-compatible chat client, its context and model
from `/props` (llama_props.py)."""

from __future__ import annotations

from .chat import ChatBackend
from .llama_props import server_props

__all__ = ["LlamaChat"]


class LlamaChat(ChatBackend):
    """Instruction edits on llama-server: its OpenAI-compatible chat endpoint, its per-slot
    context from `/props`."""

    async def ensure_ready(self) -> None:
        if self._ready:
            return
        props = await server_props(self)
        self.n_ctx = props.default_generation_settings.n_ctx or None
        # sent only when the entry names one (a router-mode server serves several); a plain
        # llama-server answers with the model it has
        self.served = self.cfg.model or props.model_alias or props.model_path.rsplit("/", 1)[-1]
        self.llama = self.warms = True
        self._ready = True
