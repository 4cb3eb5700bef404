"""Counters and latency samples per backend, for `:LocalCopilot stats` and health."""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

__all__ = ["Stats", "percentile"]


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class Stats:
    def __init__(self, keep: int = 500) -> None:
        self.counters: Counter[str] = Counter()
        self._keep = keep
        # backend -> samples of (time to first token s, total s, generated chars)
        self.samples: dict[str, deque[tuple[float, float, int]]] = {}

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def __getitem__(self, name: str) -> int:
        return self.counters[name]

    def latency(self, backend: str, ttft: float, total: float, chars: int) -> None:
        self.samples.setdefault(backend, deque(maxlen=self._keep)).append((ttft, total, chars))

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"counters": dict(self.counters), "backends": {}}
        accepts = sum(v for k, v in self.counters.items() if k.startswith("accepts_"))
        shown = self.counters["shown"]
        out["acceptance_rate"] = accepts / shown if shown else 0.0
        for name, samples in self.samples.items():
            ttft = [s[0] * 1000 for s in samples]
            total = [s[1] * 1000 for s in samples]
            rate = [s[2] / (s[1] - s[0]) for s in samples if s[1] - s[0] > 0.001]
            out["backends"][name] = {
                "n": len(samples),
                "ttft_ms": {p: round(percentile(ttft, p), 1) for p in (50, 95, 99)},
                "total_ms": {p: round(percentile(total, p), 1) for p in (50, 95, 99)},
                "chars_per_s": round(percentile(rate, 50), 1),
                "total_samples_ms": total,
            }
        return out
