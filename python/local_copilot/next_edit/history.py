"""The user's recent edits, across buffers, bounded by count, bytes and age.

The editor records each change as a splice: in file `path`, the lines from `row` on that were
`old` are now `new` (lua/local_copilot/edit_recorder.lua). Consecutive splices of one file whose
ranges touch are merged into one event, so typing a word is one edit, not one per key; an
event whose text went back to what it was is dropped. The formats render events as unified
diffs (Zeta, Zeta-2) or as original/updated blocks (Sweep).
"""

from __future__ import annotations

import difflib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["EditEvent", "History", "unified_hunk"]


@dataclass(frozen=True, slots=True)
class EditEvent:
    path: str
    row: int  # 0-based first row of the splice, in the file as it is after it
    old: tuple[str, ...]
    new: tuple[str, ...]
    at: float  # time.monotonic() of its last change
    # unchanged rows just above and below the splice (the diffs' context)
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return sum(len(s) + 1 for part in (self.old, self.new, self.before, self.after) for s in part)

    @property
    def original(self) -> list[str]:
        """The rows as they were, with their context."""
        return [*self.before, *self.old, *self.after]

    @property
    def updated(self) -> list[str]:
        """The rows as they are, with their context."""
        return [*self.before, *self.new, *self.after]


def unified_hunk(event: EditEvent, context: int = 3) -> str:
    """The event as the body of a unified diff (`@@` header and -/+/space lines), without the
    `---`/`+++` file header; its context lines are those the event carries."""
    lines = list(difflib.unified_diff(event.original, event.updated, lineterm="", n=context))[2:]
    if not lines:
        return ""
    # difflib numbers from 1 within the event: shift the hunk headers to the file's rows
    first = event.row - len(event.before)
    return "\n".join(_shift_header(line, first) if line.startswith("@@") else line for line in lines)


def _shift_header(header: str, row: int) -> str:
    # "@@ -a,b +c,d @@" with a and c counted from 1 within the event
    parts = header.split()
    def shift(part: str) -> str:
        sign, rest = part[0], part[1:]
        start, _, count = rest.partition(",")
        n = int(start) + row if int(start) > 0 or count == "" else row
        return f"{sign}{n}" + (f",{count}" if count else "")
    return f"@@ {shift(parts[1])} {shift(parts[2])} @@"


class History:
    """Recent edits, oldest first. The bounds keep the prompt small and stale edits out."""

    def __init__(self, max_events: int = 16, max_bytes: int = 16_384, max_age_s: float = 600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_events, self.max_bytes, self.max_age_s = max_events, max_bytes, max_age_s
        self._clock = clock
        self._events: deque[EditEvent] = deque()

    def record(self, path: str, row: int, old: list[str], new: list[str], before: list[str] | None = None,
               after: list[str] | None = None) -> None:
        """One splice from the editor: rows `row`..`row+len(old)` of `path` became `new`;
        `before` and `after` are the unchanged rows around it."""
        if list(old) == list(new):
            return
        now = self._clock()
        last = self._events[-1] if self._events else None
        if last is not None and last.path == path and last.row <= row and row + len(old) <= last.row + len(last.new):
            # inside what the last event produced: fold into it (the rows around it stay)
            at = row - last.row
            merged_new = last.new[:at] + tuple(new) + last.new[at + len(old):]
            self._events.pop()
            if merged_new != last.old:
                self._events.append(EditEvent(path, last.row, last.old, merged_new, now, last.before, last.after))
        else:
            event = EditEvent(path, row, tuple(old), tuple(new), now, tuple(before or ()), tuple(after or ()))
            if event.size > self.max_bytes:
                return  # a paste of a whole file says nothing about the next edit
            self._events.append(event)
        self._trim(now)

    def events(self, *, exclude: Callable[[str], bool] | None = None) -> list[EditEvent]:
        """The kept events, oldest first, without those of paths `exclude` refuses."""
        self._trim(self._clock())
        return [e for e in self._events if exclude is None or not exclude(e.path)]

    def forget_path(self, path: str) -> None:
        self._events = deque(e for e in self._events if e.path != path)

    def clear(self) -> None:
        self._events.clear()

    def __len__(self) -> int:
        return len(self._events)

    def _trim(self, now: float) -> None:
        events = self._events
        while events and now - events[0].at > self.max_age_s:
            events.popleft()
        while len(events) > self.max_events:
            events.popleft()
        total = sum(e.size for e in events)
        while events and total > self.max_bytes:
            total -= events.popleft().size
