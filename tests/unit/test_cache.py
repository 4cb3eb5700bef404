"""pipeline/cache.py: the LRU of finished suggestions keyed by the text around the cursor."""

from __future__ import annotations

from local_copilot.pipeline.cache import SuggestionCache


def test_lru_evicts_the_oldest() -> None:
    cache = SuggestionCache(size=2)
    cache.put("a", "1")
    cache.put("b", "2")
    assert cache.get("a") == "1"
    cache.put("c", "3")
    assert cache.get("b") is None and cache.get("a") == "1" and cache.get("c") == "3"
    assert cache.hits == 3 and cache.misses == 1


def test_putting_a_key_again_replaces_its_text_and_makes_it_the_newest() -> None:
    cache = SuggestionCache(size=2)
    cache.put("a", "1")
    cache.put("b", "2")
    cache.put("a", "one")
    cache.put("c", "3")  # "b" is now the oldest
    assert cache.get("a") == "one" and cache.get("b") is None and cache.get("c") == "3"


def test_a_partial_text_is_marked_until_the_whole_one_replaces_it() -> None:
    cache = SuggestionCache()
    cache.put("k", "def f(", partial=True)
    assert cache.is_partial("k") and cache.get("k") == "def f("
    cache.put("k", "def f(x):")
    assert not cache.is_partial("k") and cache.get("k") == "def f(x):"
    assert not cache.is_partial("missing")


def test_asking_whether_a_text_is_partial_counts_no_hit_or_miss() -> None:
    cache = SuggestionCache()
    cache.put("k", "x", partial=True)
    cache.is_partial("k")
    cache.is_partial("other")
    assert (cache.hits, cache.misses) == (0, 0)


def test_clear_forgets_every_suggestion_but_keeps_the_counts() -> None:
    cache = SuggestionCache()
    cache.put("a", "1")
    assert cache.get("a") == "1"
    cache.clear()
    assert cache.get("a") is None
    assert (cache.hits, cache.misses) == (1, 1)
