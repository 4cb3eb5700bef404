"""The health report's shape: sections of items, each OK/INFO/WARN/ERROR with advice."""

from __future__ import annotations

import msgspec

from . import checks as hc
from .checks import Item, Level

__all__ = ["Item", "Report", "Section"]


class Section(msgspec.Struct, kw_only=True):
    name: str
    items: list[Item] = []

    def add(self, level: Level, message: str, *advice: str) -> Item:
        item = Item(level=level, message=message, advice=[a for a in advice if a])
        self.items.append(item)
        return item


class Report(msgspec.Struct, kw_only=True):
    sections: list[Section] = []

    def worst(self) -> Level:
        order = {lvl: i for i, lvl in enumerate(hc.LEVELS)}
        levels = [it.level for s in self.sections for it in s.items]
        return max(levels, key=lambda lvl: order[lvl]) if levels else "ok"

    @property
    def broken(self) -> bool:
        return any(it.level == "error" for s in self.sections for it in s.items)
