"""A small LRU of finished suggestions keyed by the text around the cursor.

The key (prompt/cache_key.py) uses only the lines near the cursor, so the same spot hits even when the snapshot
window has slid (after accepting a multi-line suggestion the window starts lower).
Backspacing and retyping, or accepting a suggestion that was prefetched, cost no request.
"""

from __future__ import annotations

from collections import OrderedDict

from ..prompt.cache_key import context_key

__all__ = ["SuggestionCache", "context_key"]


class SuggestionCache:
    def __init__(self, size: int = 256) -> None:
        self.size = size
        # key -> (text, partial): a partial text is the quick first part of a suggestion whose
        # rest was not fetched yet (the engine continues it when it is shown again)
        self._items: OrderedDict[str, tuple[str, bool]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> str | None:
        item = self._items.get(key)
        if item is None:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return item[0]

    def is_partial(self, key: str) -> bool:
        item = self._items.get(key)
        return item is not None and item[1]

    def put(self, key: str, text: str, *, partial: bool = False) -> None:
        self._items[key] = (text, partial)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()
