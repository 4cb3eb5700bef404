"""The small process that launches one server and stays beside it.

Why a separate process: the server must outlive the Neovim that started it (others may share
it), and someone must stop it when the last user is gone, even when every Neovim was killed
without a chance to say goodbye, and after the keep-alive delay. The janitor:

* starts the server in its own process group (stop = signal the group: vLLM has children),
  with its output appended to the log, and reports the pid on stdout (one JSON line);
* reaps it (no zombies in any Neovim) and records its exit code in the state file;
* every `poll_s`: drops dead users; when no live user is left (and the server is not
  pinned by `local-copilot start`) for `keep_alive_s`, stops the server;
* keeps the log small: past `max_log_bytes` it copies it to `.1` and truncates it in place
  (the server writes with O_APPEND, so it just goes on at the new end).

It reads its spec as JSON on stdin, so the environment (which may hold API keys) never touches
the disk. Standard library only, for a fast start.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..privacy.files import open_private
from ..scheduling import set_scheduling
from .registry import ServerFiles, kill_group, proc_start_time


def rotate(path: Path, keep: int) -> None:
    """log -> log.1 -> log.2 ...; the oldest beyond `keep` is dropped."""
    for i in range(keep, 0, -1):
        src = path if i == 1 else path.with_name(f"{path.name}.{i - 1}")
        if src.exists():
            os.replace(src, path.with_name(f"{path.name}.{i}"))


def copytruncate(path: Path, keep: int) -> None:
    for i in range(keep, 1, -1):
        src = path.with_name(f"{path.name}.{i - 1}")
        if src.exists():
            os.replace(src, path.with_name(f"{path.name}.{i}"))
    shutil.copyfile(path, path.with_name(f"{path.name}.1"))
    with open(path, "r+b") as f:
        f.truncate(0)


def terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid, signal.SIGKILL)
        proc.wait()


def _idle_check(files: ServerFiles, spec: dict[str, Any], pid: int, keep_alive: float,
                idle_since: float | None) -> tuple[float | None, bool]:
    """(new idle_since, stop now?). Stopping clears the state under the lock, so a Neovim
    that starts at that moment sees no server and starts a new one instead of attaching."""
    with files.locked():
        state = files.read_state()
        users = files.prune_users()
        pinned = bool(spec.get("pinned")) or bool(state and state.get("pinned"))
        ours = (state or {}).get("pid") == pid
        now = time.monotonic()
        idle_since = (idle_since or now) if ours and not pinned and not users else None
        stop = idle_since is not None and now - idle_since >= keep_alive
        if stop:
            files.clear()
    return idle_since, stop


def run(spec: dict[str, Any]) -> int:
    # started from the host's network thread, which runs as SCHED_BATCH (worker.py): the
    # server must not inherit that
    set_scheduling("SCHED_OTHER")
    files = ServerFiles(spec["dir"], spec["backend"], int(spec["port"]))
    log_path = Path(spec["log"])
    log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = open_private(log_path, "ab")  # the server keeps writing to it; 0600: prompts may be in it
    try:
        proc = subprocess.Popen(spec["argv"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=spec["env"], cwd=spec.get("cwd") or None, process_group=0)
    except OSError as exc:
        print(json.dumps({"error": f"{exc.strerror or exc}: {spec['argv'][0]}"}), flush=True)
        return 1
    print(json.dumps({"pid": proc.pid, "start": proc_start_time(proc.pid)}), flush=True)
    # from here on our own output goes to the log (the supervisor closed the pipe)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)

    poll = float(spec.get("poll_s", 0.5))
    keep_alive = float(spec.get("keep_alive_s", 0.0))
    max_log = int(spec.get("max_log_bytes", 20_000_000))
    idle_since: float | None = None
    while True:
        try:
            rc = proc.wait(poll)
        except subprocess.TimeoutExpired:
            rc = None
        if rc is not None:
            with contextlib.suppress(TimeoutError), files.locked():
                state = files.read_state()
                if state and state.get("pid") == proc.pid:
                    state.update(exit_code=rc, exited_at=time.time())
                    files.write_state(state)
            return 0
        try:
            idle_since, stop = _idle_check(files, spec, proc.pid, keep_alive, idle_since)
        except TimeoutError:  # a stuck lock holder: try again next round
            continue
        if stop:
            print(f"[local-copilot] no Neovim uses this server any more: stopping pid {proc.pid}", flush=True)
            terminate(proc, float(spec.get("stop_timeout_s", 15)))
            return 0
        with contextlib.suppress(OSError):
            if log_path.stat().st_size > max_log:
                copytruncate(log_path, int(spec.get("keep_logs", 2)))


def main() -> int:
    return run(json.loads(sys.stdin.read()))


if __name__ == "__main__":
    sys.exit(main())
