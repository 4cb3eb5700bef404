"""The user's recent edits at other places, as repository context for ghost text (and every
surface of the same pipeline): the new text of each edited region with the few unchanged rows
around it, under its file's name.

The editor records a change once it is finished (lua/local_copilot/recent_edits.lua: the next
change is far from it, its buffer is hidden, or Insert mode starts away from it) and sends it
as an `edits` event, never with a keystroke. Here the newest few are kept, each judged by the
privacy policy when it comes (its file's path and its text: an edit in a secret, excluded or
ignored file, or one holding a credential, is never kept) and again under each new policy or a
path the policy refuses since. An edit of a region edited before replaces the older one. The
pipeline (pipeline/prepare.py) leaves out the ones the prompt's window shows already.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .imports import project_root
from .long_lines import cut_lines

__all__ = ["MAX_EDITS", "MAX_LINES", "RecentEdit", "RecentEdits"]

MAX_EDITS = 8  # kept, across files: older ones say less of what the user does now
MAX_LINES = 40  # new rows of one edit: a pasted file says little of the change being made


@dataclass(frozen=True, slots=True)
class RecentEdit:
    buf: int
    path: str  # the file's path, for the policy and the window's own file
    filename: str  # its name as the server reads it: relative to its project
    first: int  # 0-based row of text's first line in the file (as the edit left it)
    last: int  # and of its last
    text: str  # the rows around the edit and its new rows, each ending in a newline
    serial: int  # larger is newer


class RecentEdits:
    """The newest edits, oldest first, judged by the policy in force."""

    def __init__(self) -> None:
        self._edits: list[RecentEdit] = []
        self._serial = 0
        self._policy: Any = None  # what judged the kept ones (privacy/policy.py's Policy)

    def put(self, buf: int, path: str, row: int, new: list[str], before: list[str], after: list[str],
            policy: Any) -> bool:
        """Rows from `row` of buffer `buf` (the file at `path`) are now `new`; `before` and
        `after` are the unchanged rows around them. True when it is kept."""
        if not path:
            return False  # (a buffer without a file has no name to show the model)
        if len(new) > MAX_LINES:
            new, after = new[:MAX_LINES], []  # (the rows after would not follow what is kept)
        if not any(line.strip() for line in new):
            return False  # lines deleted: nothing new to show
        lines = list(cut_lines([*before, *new, *after]))
        if policy is not None:
            self._use(policy)
            if policy.refusal(path, lines) is not None:
                return False
        first = row - len(before)
        last = first + len(lines) - 1
        # the region edited again: only its newest text stays
        self._edits = [e for e in self._edits if e.path != path or e.last < first or e.first > last]
        self._serial += 1
        self._edits.append(RecentEdit(buf, path, _name(path), first, last,
                                      "".join(line + "\n" for line in lines), self._serial))
        del self._edits[:-MAX_EDITS]
        return True

    def newest_first(self, policy: Any) -> list[RecentEdit]:
        """The kept edits, the newest first; under another policy than the one that judged
        them, those it refuses are dropped, and a path refused since is asked each time (the
        policy caches its verdicts)."""
        if policy is None or not self._edits:  # (none: asked on every key)
            return self._edits[::-1]
        self._use(policy)
        return [e for e in reversed(self._edits) if policy.path_reason(e.path) is None]

    def forget_buffer(self, buf: int) -> None:
        """The buffer was wiped: none of its edits is sent again."""
        self._edits = [e for e in self._edits if e.buf != buf]

    def clear(self) -> None:
        self._edits.clear()

    def _use(self, policy: Any) -> None:
        if policy is not self._policy:
            self._policy = policy
            self._edits = [e for e in self._edits if policy.refusal(e.path, e.text.split("\n")) is None]


def _name(path: str) -> str:
    """The file's name relative to its project, else its own name alone (a path outside a
    project would tell the server where the user's home is)."""
    if os.path.isabs(path):
        try:
            return Path(path).resolve().relative_to(project_root(path)).as_posix()
        except (ValueError, OSError):
            pass
    return os.path.basename(path) or path
