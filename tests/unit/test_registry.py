"""Shared server state: pid liveness, the users registry, log rotation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from local_copilot.servers.janitor import copytruncate, rotate
from local_copilot.servers.registry import ServerFiles, pid_alive, proc_start_time

from ..helpers import wait_for


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_pid_alive() -> None:
    assert pid_alive(os.getpid())
    assert pid_alive(os.getpid(), proc_start_time(os.getpid()))
    assert not pid_alive(dead_pid())
    assert not pid_alive(None) and not pid_alive(0)


def test_a_recycled_pid_is_not_our_process() -> None:
    start = proc_start_time(os.getpid())
    if start is None:  # no /proc
        return
    assert not pid_alive(os.getpid(), start + 1)


def test_a_zombie_is_dead() -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    # not reaped: once it exits it is a zombie, which kill(pid, 0) still finds
    wait_for(lambda: not pid_alive(p.pid), what="the child to exit")
    os.kill(p.pid, 0)
    p.wait()


def test_users_registry_tells_users_apart_and_drops_dead_ones(tmp_path: Path) -> None:
    files = ServerFiles(tmp_path, "llama.cpp", 8012)
    assert files.key == "llama.cpp-8012"
    with files.locked():
        files.add_user("a")
        files.add_user("b")  # same process, another user
        files.add_user("ghost", pid=dead_pid())
    assert sorted(u["id"] for u in files.users()) == ["a", "b"]
    with files.locked():
        assert [u["id"] for u in files.remove_user("a")] == ["b"]
    assert [u["id"] for u in files.prune_users()] == ["b"]


def test_backend_names_become_safe_file_names(tmp_path: Path) -> None:
    assert ServerFiles(tmp_path, "my lab/gpu", 1).key == "my_lab_gpu-1"


def test_rotate_keeps_two_old_logs(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    for i in range(4):
        log.write_text(f"run {i}\n")
        rotate(log, 2)
    assert not log.exists()
    assert (tmp_path / "s.log.1").read_text() == "run 3\n"
    assert (tmp_path / "s.log.2").read_text() == "run 2\n"
    assert not (tmp_path / "s.log.3").exists()


def test_copytruncate_keeps_the_file_open_for_appends(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    with open(log, "ab") as f:  # the server's descriptor, O_APPEND
        f.write(b"old\n")
        f.flush()
        copytruncate(log, 2)
        f.write(b"new\n")
        f.flush()
    assert log.read_bytes() == b"new\n"
    assert (tmp_path / "s.log.1").read_bytes() == b"old\n"
