"""Counters and latency samples per backend, for `:LocalCopilot stats` and health."""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

__all__ = ["Stats", "percentile", "histogram", "HISTOGRAM_EDGES_MS"]

# bucket upper bounds for the latency histograms; the last bucket is open
HISTOGRAM_EDGES_MS = (5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
ACCEPT_KINDS = ("full", "word", "line")


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def histogram(values_ms: list[float], edges: tuple[int, ...] = HISTOGRAM_EDGES_MS) -> list[list[Any]]:
    """[[label, count], ...] over fixed log-spaced buckets, from the first to the last non-empty one.

    >>> histogram([3, 7, 8, 40])
    [['<5', 1], ['5-10', 2], ['10-20', 0], ['20-50', 1]]
    """
    counts = [0] * (len(edges) + 1)
    for v in values_ms:
        i = next((i for i, e in enumerate(edges) if v < e), len(edges))
        counts[i] += 1
    used = [i for i, c in enumerate(counts) if c]
    if not used:
        return []
    labels = [f"<{edges[0]}"] + [f"{a}-{b}" for a, b in zip(edges, edges[1:], strict=False)] + [f">={edges[-1]}"]
    return [[labels[i], counts[i]] for i in range(used[0], used[-1] + 1)]


class Stats:
    def __init__(self, keep: int = 500) -> None:
        self.counters: Counter[str] = Counter()
        self._keep = keep
        # backend -> samples of (time to first token s, total s, generated chars)
        self.samples: dict[str, deque[tuple[float, float, int]]] = {}
        # backend -> its own counters; counts go to `backend`
        self.by_backend: dict[str, Counter[str]] = {}
        self._backend = ""
        self._explicit = False
        # next edits: seconds from request to the edit shown (or to nothing to show)
        self.next_edit_samples: deque[float] = deque(maxlen=keep)

    @property
    def backend(self) -> str:
        """The backend that counts are attributed to: the one set with `set_backend` (the engine
        does on configure), else the backend of the latest latency sample."""
        return self._backend

    def set_backend(self, name: str) -> None:
        self._backend, self._explicit = name, True

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n
        key = self._backend or "?"
        mine = self.by_backend.get(key)
        if mine is None:  # not setdefault: that built a Counter per call (several per keystroke)
            mine = self.by_backend[key] = Counter()
        mine[name] += n

    def __getitem__(self, name: str) -> int:
        return self.counters[name]

    def latency(self, backend: str, ttft: float, total: float, chars: int) -> None:
        if not self._explicit:
            if not self._backend and "?" in self.by_backend:
                # counts made before the first sample named the backend belong to it
                self.by_backend.setdefault(backend, Counter()).update(self.by_backend.pop("?"))
            self._backend = backend
        self.samples.setdefault(backend, deque(maxlen=self._keep)).append((ttft, total, chars))

    def next_edit_latency(self, seconds: float) -> None:
        self.next_edit_samples.append(seconds)

    def next_edit_summary(self) -> dict[str, Any]:
        """Next edits shown, accepted, dismissed, quiet (the model had no edit, or none that
        parsed) and the time from request to answer."""
        ms = [s * 1000 for s in self.next_edit_samples]
        out: dict[str, Any] = {k: int(self.counters.get(f"next_edit_{k}", 0))
                               for k in ("requests", "shown", "accepted", "dismissed", "quiet", "failed")}
        out["latency_ms"] = {f"p{p}": round(percentile(ms, p), 1) for p in (50, 90)}
        out["n"] = len(ms)
        return out

    @staticmethod
    def _acceptance(counters: Counter[str] | dict[str, int]) -> tuple[dict[str, int], float]:
        accepts = {k: int(counters.get(f"accepts_{k}", 0)) for k in ACCEPT_KINDS}
        shown = int(counters.get("shown", 0))
        return accepts, (sum(accepts.values()) / shown if shown else 0.0)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"counters": dict(self.counters), "backends": {}, "next_edit": self.next_edit_summary()}
        _, out["acceptance_rate"] = self._acceptance(self.counters)
        for name in list(self.samples) + [b for b in self.by_backend if b not in self.samples]:
            samples = self.samples.get(name) or deque()
            counters = self.by_backend.get(name, Counter())
            accepts, rate_accept = self._acceptance(counters)
            ttft = [s[0] * 1000 for s in samples]
            total = [s[1] * 1000 for s in samples]
            rate = [s[2] / (s[1] - s[0]) for s in samples if s[1] - s[0] > 0.001]
            out["backends"][name] = {
                "n": len(samples),
                # string keys: a msgpack map with integer keys crashes Neovim's decoder (SIGSEGV)
                "ttft_ms": {f"p{p}": round(percentile(ttft, p), 1) for p in (50, 95, 99)},
                "total_ms": {f"p{p}": round(percentile(total, p), 1) for p in (50, 95, 99)},
                "chars_per_s": round(percentile(rate, 50), 1),
                "total_samples_ms": total,
                "counters": dict(counters),
                "accepts": accepts,
                "acceptance_rate": rate_accept,
                "ttft_hist": histogram(ttft),
                "total_hist": histogram(total),
            }
        return out
