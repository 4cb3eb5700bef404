"""A suggestion's candidates as Lua draws them: the text and where accept-word stops (the
shapes, `RenderPlan` and `Candidate`, are the editor port's: updates.py)."""

from __future__ import annotations

from ..updates import Candidate, RenderPlan
from .words import word_stops

__all__ = ["Candidate", "RenderPlan", "candidate"]


def candidate(text: str) -> Candidate:
    return Candidate(text=text, words=word_stops(text))
