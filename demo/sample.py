"""A small module to try local-copilot on: go into insert mode anywhere and type."""

from dataclasses import dataclass


@dataclass
class Point:
    x: float
    y: float

    def distance_to(self, other: "Point") -> float:
        dx = self.x - other.x
        dy = self.y - other.y
        return (dx * dx + dy * dy) ** 0.5


def centroid(points: list[Point]) -> Point:
    n = len(points)
    
