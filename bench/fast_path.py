"""Counts the package's Python calls and files on one keystroke's fast path: a snapshot
submitted to the ghost-text engine against the real tiny llama-server (its speed known, the
prompt cached, the answer there within a frame), traced with sys.setprofile from submit()
until the first suggestion reaches the editor port. Each call of a function of the package
counts (a generator's resumption counts again); the fewest of five keys is printed.

    .venv/bin/python bench/fast_path.py CHECKOUT [-v]

CHECKOUT is this repository or another checkout of it, measured with its own package (one
from before the pipeline, whose engine was the composition root, is measured too).
"""

from __future__ import annotations

import asyncio
import collections
import importlib
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any


def make(editor: Any) -> tuple[Any, Any, Any]:
    """(what is configured and closed, what takes snapshots, a buffer's state by number)."""
    try:
        core = importlib.import_module("local_copilot.core").Core(editor)
        return core, core.ghost, core.state
    except ImportError:
        try:
            engine_module = importlib.import_module("local_copilot.ghost.engine")
        except ImportError:
            engine_module = importlib.import_module("local_copilot.engine")
        engine = engine_module.Engine(editor)
        return engine, engine, engine.state


async def main(root: Path, verbose: bool) -> None:
    load_config = importlib.import_module("local_copilot.config").load_config
    write_gguf = importlib.import_module("local_copilot.devtools.tiny_model").write_gguf
    llama = importlib.import_module("local_copilot.servers.llama_cpp")
    Snapshot = importlib.import_module("local_copilot.snapshot").Snapshot
    RecordingEditor = importlib.import_module("tests.fakes.editor").RecordingEditor
    package = str(root / "python" / "local_copilot")

    d = Path(tempfile.mkdtemp())
    model = write_gguf(d / "x.gguf", favor="x")
    with llama.LlamaServer.for_model(model, log_file=d / "server.log") as server:
        editor = RecordingEditor()
        configured, ghost, state = make(editor)
        configured.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}}))
        text = "value = "

        async def key(seq: int, trace: bool = False) -> collections.Counter[tuple[str, str]]:
            n = len(editor.plans)
            calls: collections.Counter[tuple[str, str]] = collections.Counter()

            def profile(frame: FrameType, event: str, arg: object) -> None:
                if event == "call" and frame.f_code.co_filename.startswith(package):
                    calls[(frame.f_code.co_filename[len(package) + 1:], frame.f_code.co_name)] += 1

            line = text[: 4 + seq % 4] + "a" * seq
            if trace:
                sys.setprofile(profile)
            ghost.submit(Snapshot(buf=1, tick=seq, row=0, col=len(line), first=0, lines=[line], seq=seq))
            while len(editor.plans) == n:
                await asyncio.sleep(0)
            sys.setprofile(None)
            for _ in range(100):  # the request ends (its continuation, its speculation)
                await asyncio.sleep(0.01)
                if not any(state(1).in_flight().values()):
                    break
            return calls

        for i in range(1, 12):  # the server's speed measured, its prompt cached
            await key(i)
        results = [await key(20 + i, trace=True) for i in range(5)]
        calls = min(results, key=lambda c: sum(c.values()))
        files: collections.Counter[str] = collections.Counter()
        for (file, _), n in calls.items():
            files[file] += n
        per_key = [sum(c.values()) for c in results]
        print(f"calls {sum(calls.values())} in {len(files)} files (the fewest of 5 keys; per key: {per_key})")
        for file, n in files.most_common():
            print(f"  {n:4d} {file}")
        if verbose:
            for (file, function), n in sorted(calls.items()):
                print(f"     {n:3d} {file}:{function}")
        await configured.close()


if __name__ == "__main__":
    checkout = Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(checkout / "python"))
    sys.path.insert(0, str(checkout))
    asyncio.run(main(checkout, "-v" in sys.argv))
