"""A stand-in for the editor port (updates.Editor) that records every update the core sends, for
tests that drive the core without Neovim; the properties are views of one kind of update."""

from __future__ import annotations

from local_copilot.updates import (
    BackendState,
    EditProgress,
    EditUpdate,
    NextEditPlan,
    Notice,
    PrivacyVerdict,
    Render,
    RenderPlan,
    Update,
)


class RecordingEditor:
    def __init__(self) -> None:
        self.updates: list[Update] = []

    def update(self, u: Update) -> None:
        self.updates.append(u)

    @property
    def plans(self) -> list[RenderPlan]:
        return [u.plan for u in self.updates if isinstance(u, Render)]

    @property
    def final(self) -> list[str]:
        """The text of each final suggestion shown ('' for none)."""
        return [p.items[0].text if p.items else "" for p in self.plans if p.final]

    @property
    def notes(self) -> list[tuple[str, str]]:
        """The notices: (message, level)."""
        return [(u.message, u.level) for u in self.updates if isinstance(u, Notice)]

    @property
    def states(self) -> list[str]:
        """The backend states told, in order."""
        return [u.state for u in self.updates if isinstance(u, BackendState)]

    @property
    def verdicts(self) -> list[tuple[int, str, str | None, str]]:
        """The privacy policy's verdicts: (buf, path, reason, kind)."""
        return [(u.buf, u.path, u.reason, u.kind) for u in self.updates if isinstance(u, PrivacyVerdict)]

    @property
    def next_edits(self) -> list[NextEditPlan]:
        return [u for u in self.updates if isinstance(u, NextEditPlan)]

    @property
    def edits(self) -> list[EditUpdate]:
        """Instruction edits' previews and outcomes."""
        return [u.update for u in self.updates if isinstance(u, EditProgress)]
