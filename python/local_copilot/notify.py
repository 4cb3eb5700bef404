"""At most one concise notification per failure episode; the details go to the log."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Episodes", "EpisodeNotifier"]


class EpisodeNotifier:
    """An episode starts at the first failure and ends at the next success.

    Within an episode the user hears once; a different kind of failure may speak again,
    but never more often than `min_interval_s`.
    """

    def __init__(self, send: Callable[[str, str], None], *, min_interval_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._send = send
        self._min_interval = min_interval_s
        self._clock = clock
        self._kind: str | None = None
        self._last_at = float("-inf")

    @property
    def in_episode(self) -> bool:
        return self._kind is not None

    def failure(self, kind: str, message: str, level: str = "warn") -> bool:
        now = self._clock()
        if kind == self._kind or now - self._last_at < self._min_interval:
            self._kind = self._kind or kind
            return False
        self._kind = kind
        self._last_at = now
        self._send(message, level)
        return True

    def success(self) -> None:
        self._kind = None


class Episodes:
    """One episode per backend: ghost text and next edits that ask the same server share it,
    so a server that is down is one message, from whichever request failed first."""

    def __init__(self, send: Callable[[str, str], None]) -> None:
        self.send = send  # a message to the user, outside any episode
        self._by_backend: dict[str, EpisodeNotifier] = {}

    def of(self, backend: str) -> EpisodeNotifier:
        notifier = self._by_backend.get(backend)
        if notifier is None:
            notifier = self._by_backend[backend] = EpisodeNotifier(self.send)
        return notifier
