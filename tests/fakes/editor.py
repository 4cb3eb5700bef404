"""A stand-in for the editor port (engine.Editor) that records what the engine asks of the
editor, for tests that drive the engine without Neovim."""

from __future__ import annotations

from typing import Any

from local_copilot.ghost.render import RenderPlan
from local_copilot.instruct.runner import EditUpdate


class RecordingEditor:
    def __init__(self) -> None:
        self.plans: list[RenderPlan] = []
        self.notes: list[tuple[str, str]] = []
        self.states: list[str] = []
        self.edits: list[EditUpdate] = []
        self.next_edits: list[dict[str, Any]] = []

    @property
    def final(self) -> list[str]:
        """The text of each final suggestion shown ('' for none)."""
        return [p.items[0].text if p.items else "" for p in self.plans if p.final]

    def show(self, plan: RenderPlan) -> None:
        self.plans.append(plan)

    def notify(self, message: str, level: str) -> None:
        self.notes.append((message, level))

    def backend_state(self, state: str, message: str) -> None:
        self.states.append(state)

    def private(self, buf: int, path: str, reason: str | None, kind: str) -> None:
        pass

    def privacy_rules(self, rules: list[list[str]]) -> None:
        pass

    def show_next_edit(self, plan: dict[str, Any]) -> None:
        self.next_edits.append(plan)

    def edit_update(self, update: EditUpdate) -> None:
        self.edits.append(update)
