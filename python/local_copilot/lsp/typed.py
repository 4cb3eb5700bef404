"""Typing through: the suggestions last given in each document, so that a request after the
user typed the start of one is answered with its rest, without asking the server.

The ghost text does the same in Lua (`ghost.typed_through`); here the next request shows it:
the cursor's line grew at the cursor by what a suggestion starts with, the cursor after it, and
every other line is as it was.
"""

from __future__ import annotations

from .documents import Spot

__all__ = ["Shown"]


class Shown:
    def __init__(self) -> None:
        self._given: dict[str, tuple[Spot, list[str]]] = {}  # uri -> (where, texts)

    def keep(self, uri: str, spot: Spot, texts: list[str]) -> None:
        if texts:
            self._given[uri] = (spot, texts)
        else:
            self._given.pop(uri, None)

    def rests(self, uri: str, spot: Spot) -> list[str]:
        """What is left of the suggestions given in `uri` after what was typed since, in their
        order; [] when nothing was typed or the document changed otherwise."""
        given = self._given.get(uri)
        if given is None:
            return []
        was, texts = given
        row, col = was.snap.row, was.col
        if spot.snap.row != row or len(spot.lines) != len(was.lines):
            return []
        old, new = was.lines[row], spot.lines[row]
        grown = len(new) - len(old)
        if grown <= 0 or spot.col != col + grown or new[:col] != old[:col] or new[spot.col:] != old[col:]:
            return []
        if spot.lines[:row] != was.lines[:row] or spot.lines[row + 1:] != was.lines[row + 1:]:
            return []
        typed = new[col:spot.col]
        return [t[len(typed):] for t in texts if len(t) > len(typed) and t.startswith(typed)]

    def forget(self, uri: str) -> None:
        self._given.pop(uri, None)
