"""Per-call costs of code that runs on every keystroke or every network read, measured here
instead of bounded in the tests: the cross-file ring (`extra_for` on a full ring, `add`), and
the checks for other families' special tokens and invisible characters on an ordinary answer.
Each is printed beside the budget it was written to (a call per keystroke must stay a small
share of the host's 1 ms per key).

    .venv/bin/python bench/micro.py [--calls 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from local_copilot.pipeline.foreign_tokens import cut_foreign_tokens  # noqa: E402
from local_copilot.pipeline.invisible_chars import hidden_char  # noqa: E402
from local_copilot.prompt.ring import ContextRing  # noqa: E402


def code(tag: str, n: int) -> list[str]:
    return [f"def {tag}_{i}(value):" if i % 4 == 0 else f"    return value * {i} + {tag}_{i - 1}(value)"
            for i in range(n)]


def per_call_ms(fn: Callable[[int], object], calls: int) -> float:
    fn(-1)
    t0 = time.perf_counter()
    for k in range(calls):
        fn(k)
    return (time.perf_counter() - t0) / calls * 1000


def main(calls: int) -> None:
    ring = ContextRing()
    for i in range(40):  # more than fits: the ring is full and evicts
        ring.add(f"f{i}.py", code(f"f{i}", 64))
    local = "\n".join(code("local", 320))
    answer = "\n".join(f"    v{i} = call(x, [1, 2], d[KEY] < 3, '漢字')" for i in range(40))
    around = (tuple(f"line {i} with <tags> and [brackets]" for i in range(200)), ("    ",), ())
    rows = [
        ("ring.extra_for, 16 x 64 lines, 321-line local", 50.0,
         per_call_ms(lambda k: ring.extra_for(local + f"\nx = {k}", 100_000, lambda t: len(t) // 3), calls)),
        ("ring.add, a 64-line chunk", 50.0, per_call_ms(lambda k: ring.add(f"g{k % 4}.py", code(f"g{k}", 64)), calls)),
        ("cut_foreign_tokens, a 40-line answer", 0.5,
         per_call_ms(lambda k: cut_foreign_tokens(answer, around=around, final=False), calls)),
        ("hidden_char, a 40-line answer", 0.5, per_call_ms(lambda k: hidden_char(answer, around=around), calls)),
    ]
    print(f"{'per call':48s} {'budget':>10s} {'measured':>10s}")
    for name, budget, ms in rows:
        print(f"{name:48s} {budget:8.2f} ms {ms:8.3f} ms  {'PASS' if ms <= budget else 'FAIL'}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    main(ap.parse_args().calls)
