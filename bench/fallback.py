"""What the fallback costs: the first suggestion's time from the local entry alone, and from the
same entry listed in `fallback` behind a team entry that is down (nothing listens: refused at
once) or that takes requests and never answers (the fallback waits `fallback_after_ms`, 1500 by
default). Each set-up is a fresh plugin core (nothing measured or cached yet), against the real
tiny llama-server; the target is the local entry's time plus `fallback_after_ms` plus 100 ms.

    .venv/bin/python bench/fallback.py [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO))

from local_copilot.config import load_config  # noqa: E402
from local_copilot.core import Core  # noqa: E402
from local_copilot.devtools.tiny_model import write_gguf  # noqa: E402
from local_copilot.servers.llama_cpp import LlamaServer, free_port  # noqa: E402
from local_copilot.snapshot import Snapshot  # noqa: E402
from tests.fakes.editor import RecordingEditor  # noqa: E402


async def first_suggestion_s(options: dict[str, object], seq: int) -> float:
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config({"speculative": False, "n_predict": 8, **options}))
    line = f"value_{seq} = "
    started = time.perf_counter()
    core.ghost.submit(Snapshot(buf=1, tick=1, row=0, col=len(line), first=0, lines=[line], seq=1))
    try:
        while not editor.final:
            await asyncio.sleep(0.001)
        return time.perf_counter() - started
    finally:
        await core.close()


async def main(runs: int) -> None:
    d = Path(tempfile.mkdtemp())
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    with LlamaServer.for_model(write_gguf(d / "x.gguf", favor="x"), log_file=d / "server.log") as server:
        local = {"kind": "llama.cpp", "url": server.url}
        setups = {
            "local alone": {"backend": "local", "backends": {"local": local}},
            "team down (refused)": {"backend": "team", "fallback": ["local"], "backends": {
                "team": {"kind": "llama.cpp", "url": f"http://127.0.0.1:{free_port()}"}, "local": local}},
            "team silent, fallback_after_ms 1500": {"backend": "team", "fallback": ["local"], "backends": {
                "team": {"kind": "llama.cpp", "url": f"http://127.0.0.1:{silent.getsockname()[1]}"}, "local": local}},
        }
        print(f"first suggestion, {runs} fresh cores each (ms): p50 / max")
        for name, options in setups.items():
            times = [await first_suggestion_s(options, i) * 1000 for i in range(runs)]
            print(f"  {name:38s} {statistics.median(times):8.1f} / {max(times):8.1f}")
    silent.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    asyncio.run(main(ap.parse_args().runs))
