"""Allocation reports from the Python host, for the soak (tests/integration/test_soak.py).

With this folder on PYTHONPATH and LOCAL_COPILOT_TRACEMALLOC=FILE in the environment, a Python
started as `python -c ...` (the host Neovim starts) traces its allocations from the start; on
SIGUSR1 it appends to FILE its RSS, the traced total, the sizes of the post-processing and
privacy caches and, from the second report on, the allocations that grew since the first
(grouped by traceback), then writes the report's number to FILE.done. The soak sends the
signal every 1,000 keys:

    PYTHONPATH=bench/memtrace LOCAL_COPILOT_TRACEMALLOC=/tmp/trace.txt \\
        .venv/bin/python -m pytest -s tests/integration/test_soak.py

Tracing costs memory of its own: read the traced totals and the growth, not the RSS.
"""

from __future__ import annotations

import os
import sys

FRAMES = int(os.environ.get("LOCAL_COPILOT_TRACEMALLOC_FRAMES", "6"))
TOP = int(os.environ.get("LOCAL_COPILOT_TRACEMALLOC_TOP", "15"))


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _caches() -> list[str]:
    import gc

    out = []
    pkg = "local_copilot.pipeline.postprocess"
    scanner, structure, compose = (sys.modules.get(f"{pkg}.{m}") for m in ("scanner", "structure", "compose"))
    if scanner is not None and structure is not None and compose is not None:
        for mod, name in ((scanner, "_scan_cached"), (scanner, "_summary"), (structure, "_walk_back"),
                          (structure, "_walk_back_from")):
            info = getattr(getattr(mod, name, None), "cache_info", None)
            if info is not None:
                out.append(f"{name}: {info()}")
        out.append(f"_RESUME {len(getattr(scanner, '_RESUME', {}))}, _LOOPS {len(getattr(compose, '_LOOPS', {}))}")
    privacy = sys.modules.get("local_copilot.privacy.policy")
    if privacy is not None:
        sizes = [len(o._lines) for o in gc.get_objects() if isinstance(o, privacy.Policy)]
        out.append(f"privacy line caches {sizes}")
    return out


def _install(out: str) -> None:
    import signal
    import tracemalloc

    tracemalloc.start(FRAMES)
    state: dict[str, object] = {"first": None, "n": 0}
    skip = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "*/linecache.py"),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap*>")]

    def report(signum: int, frame: object) -> None:
        snap = tracemalloc.take_snapshot().filter_traces(skip)
        traced, _ = tracemalloc.get_traced_memory()
        n = int(state["n"]) + 1  # type: ignore[call-overload]
        state["n"] = n
        lines = [f"#{n} rss {_rss_mb():.2f} MB, traced {traced / 1e6:.2f} MB", *_caches()]
        first = state["first"]
        if first is None:
            state["first"] = snap
        else:
            for st in snap.compare_to(first, "traceback")[:TOP]:  # type: ignore[arg-type]
                lines.append(f"  {st.size_diff / 1e3:+.1f} kB in {st.count_diff:+d} blocks (now {st.size / 1e3:.1f} kB)")
                lines += ["      " + fr for fr in st.traceback.format()]
        with open(out, "a") as f:
            f.write("\n".join(lines) + "\n")
        with open(out + ".done", "w") as f:
            f.write(str(n))

    signal.signal(signal.SIGUSR1, report)


if os.environ.get("LOCAL_COPILOT_TRACEMALLOC") and sys.argv[:1] == ["-c"]:
    _install(os.environ["LOCAL_COPILOT_TRACEMALLOC"])
