"""Tests marked `background` run in a pytest of their own, started as soon as the session has
collected them, beside the rest of the session instead of after it. Their item here runs last:
it waits for that run, prints its output, and passes or fails with it (a run that collected
nothing fails too).

The soak is one: 10,000 keys through a chain of processes that each wait on the one before
(the test, Neovim, the Python host, llama-server), so it keeps about one core busy for minutes
while the other is free for the rest of the suite. The background run has a lower CPU priority
(nice 10), so the session's tests that time Neovim's answers (test_faults.py: 50 ms) have the
CPU first whenever both want it; the soak asserts on memory and on what was sent and shown,
never on time.

A background test selected alone, or in a session of background tests only, runs in the
session as usual. If the session ends before its item ran (`-x` after a failure, Ctrl-C), the
background run is interrupted the way Ctrl-C interrupts pytest, so its fixtures stop what they
started.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest

CHILD = "LOCAL_COPILOT_TEST_BACKGROUND_RUN"  # set in a background run: its tests run there
WAIT_S = 3600  # waited for once the rest of the session is done; the soak takes minutes


class Run(NamedTuple):
    proc: subprocess.Popen[bytes]
    log: Path
    tmp: Path


RUN = pytest.StashKey[Run]()
RUNS: list[Run] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "background: runs in a pytest of its own, beside the rest of the session")


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(CHILD) or config.option.collectonly:
        return
    background = [item for item in items if item.get_closest_marker("background")]
    if not background or len(background) == len(items):
        return
    for item in background:
        tmp = Path(tempfile.mkdtemp(prefix="pytest-background-"))
        log = tmp / "output.txt"
        nice = shutil.which("nice")
        argv = [sys.executable, "-m", "pytest", "-q", "-rsP", "-p", "no:cacheprovider", f"--basetemp={tmp / 'tmp'}",
                item.nodeid]
        with log.open("wb") as out:  # the child keeps its own descriptor
            proc = subprocess.Popen([nice, "-n", "10", *argv] if nice else argv, cwd=config.rootpath,
                                    env={**os.environ, CHILD: "1"}, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        item.stash[RUN] = Run(proc, log, tmp)
        RUNS.append(item.stash[RUN])
    items[:] = [item for item in items if RUN not in item.stash] + background


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    run = pyfuncitem.stash.get(RUN, None)
    if run is None:
        return None
    try:
        code = run.proc.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        stop(run)
        pytest.fail(f"its background run ({run.tmp}) did not end within {WAIT_S} s:\n"
                    f"{run.log.read_text(errors='replace')}", pytrace=False)
    output = run.log.read_text(errors="replace")
    if code != 0:
        pytest.fail(f"its background run ({run.tmp}) ended with pytest's exit code {code}:\n{output}",
                    pytrace=False)
    print(output)
    shutil.rmtree(run.tmp, ignore_errors=True)
    return True


def stop(run: Run) -> None:
    """Interrupt the run as Ctrl-C does, so its fixtures stop what they started."""
    run.proc.send_signal(signal.SIGINT)
    try:
        run.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        run.proc.wait()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for run in RUNS:
        if run.proc.poll() is None:
            stop(run)
            shutil.rmtree(run.tmp, ignore_errors=True)
    RUNS.clear()
