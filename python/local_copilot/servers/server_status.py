"""What a supervisor tells of its server: its status, the events of its life, and the
callbacks that receive them (supervisor.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec

__all__ = ["EventFn", "EventKind", "ProgressFn", "ServerEvent", "ServerStatus", "State"]

ProgressFn = Callable[[float, str], None]  # (seconds since the start, the server's latest log line)

State = Literal["stopped", "starting", "ready", "external", "crashed", "failed"]
EventKind = Literal["starting", "attached", "progress", "ready", "external", "crashed", "restarting", "failed",
                    "stopped"]


class ServerEvent(msgspec.Struct, frozen=True, kw_only=True):
    backend: str
    kind: EventKind
    message: str
    elapsed: float = 0.0
    log_line: str = ""


EventFn = Callable[[ServerEvent], None]


class ServerStatus(msgspec.Struct, frozen=True, kw_only=True):
    backend: str
    url: str
    state: State
    kind: str = ""  # recipe: llama.cpp | vllm | ollama | custom ('' when unknown)
    pid: int | None = None
    pinned: bool = False  # started from the terminal: runs until `local-copilot stop`
    users: int = 0
    uptime_s: float = 0.0
    exit_code: int | None = None
    log_path: str = ""
    argv: list[str] = []
    error: str = ""  # why it failed (state failed/crashed)
    notes: list[str] = []  # the recipe's explanations (sizing, defaults)
