"""Shared state of one managed server, in the runtime directory, keyed by backend name + port.

    <key>.json   the server: pid, its start time (guards against pid reuse), argv, url, log,
                 pinned (started from the terminal: no auto-stop), exit code once it died
    <key>.users  who uses it: [{"pid", "id"}]; `id` tells apart several users in one process
    <key>.lock   flock for read-modify-write of the two files above

Several Neovim instances read and write these, so every write is atomic (temp file + rename)
and every read-modify-write holds the lock. Standard library only: the janitor imports it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no flock; one Neovim at a time is all we promise there
    fcntl = None  # type: ignore[assignment]

__all__ = ["ServerFiles", "pid_alive", "proc_start_time", "kill_group", "atomic_write_json", "read_json"]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "backend"


def proc_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks (Linux /proc), to detect a recycled pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    # comm may hold spaces and parentheses: fields resume after the last ')'
    fields = stat[stat.rfind(")") + 2:].split()
    try:
        return int(fields[19])  # field 22 overall; fields[0] is field 3 (state)
    except (IndexError, ValueError):
        return None


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:][:1] == "Z"


def pid_alive(pid: int | None, start: int | None = None) -> bool:
    """True when `pid` runs (not a zombie) and, if `start` is known, is the same process."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    except OSError:
        return False
    if _is_zombie(pid):
        return False
    if start is not None:
        now = proc_start_time(pid)
        if now is not None and now != start:
            return False
    return True


def kill_group(pid: int, sig: int = signal.SIGTERM) -> None:
    """Signal the server's process group (vLLM runs its engine in child processes), or the
    process alone when it has no group of its own."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def atomic_write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


class ServerFiles:
    """The files of one server; `state_dir` is shared by every user of this machine account."""

    def __init__(self, state_dir: str | os.PathLike[str], backend: str, port: int) -> None:
        self.dir = Path(state_dir)
        self.key = f"{_safe(backend)}-{port}"
        self.state_path = self.dir / f"{self.key}.json"
        self.users_path = self.dir / f"{self.key}.users"
        self.lock_path = self.dir / f"{self.key}.lock"

    @contextlib.contextmanager
    def locked(self, timeout: float = 30.0) -> Iterator[None]:
        """Hold the server's lock; short sections only (never while a server loads)."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if fcntl is not None:
                deadline = time.monotonic() + timeout
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except OSError as exc:
                        if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                            raise TimeoutError(f"could not lock {self.lock_path}") from exc
                        time.sleep(0.02)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    # ---------------------------------------------------------------- state

    def read_state(self) -> dict[str, Any] | None:
        state = read_json(self.state_path)
        return state if isinstance(state, dict) else None

    def write_state(self, state: dict[str, Any]) -> None:
        atomic_write_json(self.state_path, state)

    def clear(self) -> None:
        for p in (self.state_path, self.users_path):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    def server_alive(self, state: dict[str, Any] | None = None) -> bool:
        state = self.read_state() if state is None else state
        if not state:
            return False
        return state.get("exit_code") is None and pid_alive(state.get("pid"), state.get("proc_start"))

    # ---------------------------------------------------------------- users

    def users(self) -> list[dict[str, Any]]:
        """Live users; dead ones are left in the file until the next write drops them."""
        raw = read_json(self.users_path, [])
        return [u for u in raw if isinstance(u, dict) and pid_alive(u.get("pid"), u.get("start"))] \
            if isinstance(raw, list) else []

    def add_user(self, user_id: str, pid: int | None = None) -> list[dict[str, Any]]:
        pid = pid or os.getpid()
        users = [u for u in self.users() if u.get("id") != user_id]
        users.append({"pid": pid, "id": user_id, "start": proc_start_time(pid)})
        atomic_write_json(self.users_path, users)
        return users

    def remove_user(self, user_id: str) -> list[dict[str, Any]]:
        users = [u for u in self.users() if u.get("id") != user_id]
        atomic_write_json(self.users_path, users)
        return users

    def prune_users(self) -> list[dict[str, Any]]:
        users = self.users()
        raw = read_json(self.users_path, [])
        if isinstance(raw, list) and len(raw) != len(users):
            atomic_write_json(self.users_path, users)
        return users
