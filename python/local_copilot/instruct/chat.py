"""The chat endpoint of a backend entry, for instruction edits.

Each kind's registry record names its chat dialect (`Kind.chat`: backends/chat.py's
`ChatBackend` for OpenAI's `/v1/chat/completions`, or the kind's own subclass); a kind with
none says so in one message.
"""

from __future__ import annotations

import httpx

from ..backend_config import BackendConfig
from ..backends import registry
from ..backends.chat import ChatBackend, ChatChunk
from ..errors import ConfigError

__all__ = ["ChatBackend", "ChatChunk", "chat_backend", "chat_kinds"]


def chat_kinds() -> list[str]:
    """The kinds whose servers answer a chat request."""
    return [k for k in registry.names() if registry.get(k).chat is not None]


def chat_backend(name: str, cfg: BackendConfig, client: httpx.AsyncClient, *, timeout_s: float = 60.0) -> ChatBackend:
    """The chat dialect of backend entry `name`; ConfigError for a kind with none known."""
    dialect = registry.get(cfg.kind).chat
    if dialect is None:
        raise ConfigError(f"{name}: instruction edits need a chat endpoint, and kind {cfg.kind!r} has none known "
                          f"here; set edit.backend to an entry of kind {', '.join(chat_kinds())}")
    backend: ChatBackend = dialect(name, cfg, client, timeout_s=timeout_s)
    return backend
