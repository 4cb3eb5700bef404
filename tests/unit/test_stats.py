"""Stats.summary(): per-backend counters, acceptance, percentiles and histograms."""

from __future__ import annotations

from local_copilot.stats import Stats, histogram


def test_histogram_buckets_span_the_used_range() -> None:
    assert histogram([]) == []
    assert histogram([3, 7, 8, 40]) == [["<5", 1], ["5-10", 2], ["10-20", 0], ["20-50", 1]]
    assert histogram([6000]) == [[">=5000", 1]]


def test_counts_go_to_the_backend_that_served_them() -> None:
    s = Stats()
    s.count("requests")  # before any sample: attributed to the first backend that reports one
    s.latency("llama.cpp", 0.010, 0.050, 40)
    s.count("requests")
    s.count("shown")
    s.count("accepts_full")
    s.count("cancels")
    s.set_backend("vllm")  # what the engine says on configure
    s.count("requests")
    s.count("shown")
    s.count("shown")
    s.count("accepts_word")
    s.count("typed_through")
    s.latency("vllm", 0.020, 0.120, 100)
    out = s.summary()
    assert out["counters"]["requests"] == 3  # the old global view stays
    llama, vllm = out["backends"]["llama.cpp"], out["backends"]["vllm"]
    assert llama["counters"] == {"requests": 2, "shown": 1, "accepts_full": 1, "cancels": 1}
    assert llama["accepts"] == {"full": 1, "word": 0, "line": 0} and llama["acceptance_rate"] == 1.0
    assert vllm["counters"]["typed_through"] == 1 and vllm["acceptance_rate"] == 0.5
    assert llama["ttft_ms"]["p50"] == 10.0 and llama["total_ms"]["p99"] == 50.0
    assert llama["chars_per_s"] == 1000.0  # 40 chars in the 40 ms after the first token
    assert llama["ttft_hist"] == [["10-20", 1]] and vllm["total_hist"] == [["100-200", 1]]
    assert out["acceptance_rate"] == 2 / 3


def test_a_backend_with_only_failures_still_shows() -> None:
    s = Stats()
    s.set_backend("vllm")
    s.count("requests")
    s.count("errors")
    b = s.summary()["backends"]["vllm"]
    assert b["n"] == 0 and b["counters"] == {"requests": 1, "errors": 1} and b["ttft_hist"] == []
