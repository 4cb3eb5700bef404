"""(g) What one wakeup of a Python thread costs on this machine: a yardstick for the host's CPU.

The host sleeps between keystrokes (90 ms apart) and wakes at least twice per key: for the
snapshot, and for the server's answer. After an idle gap the CPU runs the interpreter from cold
caches: on the project's 2-core VM an asyncio wakeup that reads one small message cost ~190 us
of CPU after a 90 ms gap against ~60 us after 1 ms (and a bare blocking recv() ~60 vs ~20 us).
So the host CPU per key depends on the machine as much as on the code. `wakeup_us` measures
the machine's part, with nothing of the plugin in it; `cold_work_us` times two steps of the
plugin's own per-key work warm and right after such a gap.

For `wakeup_us` another process writes a 200-byte message every `gap` seconds over a socketpair; this one reads
each in an asyncio Protocol (as the host's channel does) or in a blocking recv(), and counts its
own thread's CPU time per message.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

_SENDER = """
import socket, sys, time
s = socket.socket(fileno=int(sys.argv[1]))
n, gap = int(sys.argv[2]), float(sys.argv[3])
for _ in range(n):
    time.sleep(gap)
    s.sendall(b"m" * 199 + b"\\n")
s.sendall(b"Q")
"""


def _read_asyncio(sock: socket.socket, seen: Any) -> None:
    class Reader(asyncio.Protocol):
        def __init__(self, done: asyncio.Future[None]) -> None:
            self.done = done

        def data_received(self, data: bytes) -> None:
            if seen(data) and not self.done.done():
                self.done.set_result(None)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        await loop.connect_accepted_socket(lambda: Reader(done), sock)
        await done

    asyncio.run(main())


def _read_blocking(sock: socket.socket, seen: Any) -> None:
    while not seen(sock.recv(65536)):
        pass


def wakeup_us(gap: float, mode: str, n: int = 100) -> float:
    """CPU microseconds this thread spends per message that wakes it after `gap` seconds idle."""
    mine, theirs = socket.socketpair()
    sender = subprocess.Popen([sys.executable, "-c", _SENDER, str(theirs.fileno()), str(n), str(gap)],
                              pass_fds=[theirs.fileno()])
    theirs.close()
    marks: list[int] = []

    def seen(data: bytes) -> bool:
        marks.append(time.thread_time_ns())
        return data.endswith(b"Q") or not data

    try:
        (_read_asyncio if mode == "asyncio" else _read_blocking)(mine, seen)
    finally:
        sender.wait(timeout=60)
        mine.close()
    # from the 3rd message on: the first ones pay for imports and the loop's start
    per = [b - a for a, b in zip(marks[2:], marks[3:])]
    return statistics.median(per) / 1000 if per else float("nan")


def cold_work_us(lines: list[str], n: int = 30) -> dict[str, dict[str, float]]:
    """Two steps of the host's per-key work, timed warm (in a loop) and as the first call after
    90 ms idle, then the second right after it: the first pays for the caches the machine
    emptied meanwhile (on the project's VM ~150 against ~15 us warm, and the second is warm
    again), which is why each wakeup costs what it does."""
    import msgspec  # the plugin's own code, from here on

    from local_copilot.pipeline.postprocess import PostContext, process
    from local_copilot.prompt.budget import TokenEstimator
    from local_copilot.prompt.window import WindowFitter
    from local_copilot.snapshot import Snapshot

    def snap(i: int) -> Snapshot:
        window = list(lines[:261])
        window[200] = "    x" + "y" * (i % 8)
        return msgspec.convert({"buf": 1, "tick": i, "row": 200, "col": len(window[200]), "first": 0,
                                "lines": window, "nlines": len(lines), "ft": "python", "seq": i}, Snapshot)

    snaps = [snap(i) for i in range(8)]
    fitter, est, turn = WindowFitter(), TokenEstimator(), [0]

    def fit() -> Any:
        turn[0] += 1
        return fitter.fit(snaps[turn[0] % 8], lines_before=200, lines_after=60, budget=3500, est=est,
                          prefix_share=0.75)

    ctx = fit().ctx
    pctx = PostContext(line_prefix=ctx.middle, line_suffix=ctx.line_suffix, next_lines=ctx.next_lines,
                       prev_lines=ctx.prev_lines, tabstop=8, max_lines=16, stop_strings=())
    out: dict[str, dict[str, float]] = {}
    for name, fn in (("window fit", fit), ("post-processing", lambda: process("xxxxxx", pctx, final=True))):
        t = time.thread_time_ns()
        for _ in range(1000):
            fn()
        warm = (time.thread_time_ns() - t) / 1000 / 1000
        first, second = [], []
        for _ in range(n):
            time.sleep(0.09)  # idle, as between two keystrokes
            t0 = time.thread_time_ns()
            fn()
            t1 = time.thread_time_ns()
            fn()
            first.append(t1 - t0)
            second.append(time.thread_time_ns() - t1)
        out[name] = {"warm_us": warm, "first_after_90ms_us": statistics.median(first) / 1000,
                     "second_us": statistics.median(second) / 1000}
    return out


def calibrate(n: int = 100) -> dict[str, float]:
    return {f"{mode}_after_{int(gap * 1000)}ms_us": wakeup_us(gap, mode, n)
            for mode in ("asyncio", "blocking") for gap in (0.001, 0.09)}


if __name__ == "__main__":
    for k, v in calibrate().items():
        print(f"{k}: {v:.0f}")
