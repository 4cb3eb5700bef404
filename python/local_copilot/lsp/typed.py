"""Typing through: the suggestions last given in each document, so that a request after the
user typed the start of one is answered with its rest, without asking the server.

The ghost text does the same in Lua (`ghost.typed_through`); here the next request shows it:
the document after the cursor is unchanged and the text before it grew by what a suggestion
starts with.
"""

from __future__ import annotations

from .documents import Spot

__all__ = ["Shown"]


class Shown:
    def __init__(self) -> None:
        self._given: dict[str, tuple[str, str, list[str]]] = {}  # uri -> (before, after, texts)

    def keep(self, uri: str, spot: Spot, texts: list[str]) -> None:
        if texts:
            self._given[uri] = (spot.before, spot.after, texts)
        else:
            self._given.pop(uri, None)

    def rests(self, uri: str, spot: Spot) -> list[str]:
        """What is left of the suggestions given in `uri` after what was typed since, in their
        order; [] when nothing was typed or the document changed otherwise."""
        given = self._given.get(uri)
        if given is None:
            return []
        before, after, texts = given
        if spot.after != after or len(spot.before) <= len(before) or not spot.before.startswith(before):
            return []
        typed = spot.before[len(before):]
        return [t[len(typed):] for t in texts if len(t) > len(typed) and t.startswith(typed)]

    def forget(self, uri: str) -> None:
        self._given.pop(uri, None)
