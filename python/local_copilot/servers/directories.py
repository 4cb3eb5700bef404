"""Where the supervisors keep their files: the runtime directory (state, users and lock of
every server the plugin started on this machine, shared by every Neovim of the user) and the
servers' log directory; and the servers listed there."""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs

from ..privacy.files import check_private_dir
from .registry import pid_alive

__all__ = ["list_servers", "runtime_dir", "server_log_dir"]


def _writable_dir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return os.access(path, os.W_OK | os.X_OK)
    except OSError:
        return False


def runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where pid/lock/users files live: shared by every Neovim of this user on this machine."""
    env = os.environ if env is None else env
    if env.get("LOCAL_COPILOT_RUNTIME_DIR"):
        return Path(env["LOCAL_COPILOT_RUNTIME_DIR"]) / "servers"
    with warnings.catch_warnings():  # no XDG_RUNTIME_DIR: platformdirs warns, then falls back to /tmp
        warnings.simplefilter("ignore")
        path = Path(platformdirs.user_runtime_dir("local-copilot")) / "servers"
    if _writable_dir(path):
        return check_private_dir(path)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    # /tmp is everyone's: a directory planted there by another user (or a link) is refused
    base = check_private_dir(Path(tempfile.gettempdir()) / f"local-copilot-{uid}")
    return check_private_dir(base / "servers")


def server_log_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("LOCAL_COPILOT_LOG_DIR") or platformdirs.user_log_dir("local-copilot")
    return Path(base) / "servers"


def list_servers(env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The state of every server the plugin started on this machine (for `status` without a name)."""
    out = []
    for p in sorted(runtime_dir(env).glob("*.json")):
        try:
            state = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(state, dict):
            state["alive"] = state.get("exit_code") is None and pid_alive(state.get("pid"), state.get("proc_start"))
            out.append(state)
    return out
