"""Definitions of the names near the cursor, as the editor's language servers found them: the
signatures and short bodies of what the code at the cursor calls, with their files' names.

Lua asks the buffer's language servers off the keystroke path (lua/local_copilot/definitions.lua)
and sends what arrived, one message per buffer; the keys that follow use it. Here each buffer's
latest definitions are kept, each judged by the privacy policy (its file's path and its text:
a definition in a secret or ignored file is never kept; a file refused since, e.g. a link made
to a secret file, is asked of the policy's path cache with each key), named relative to the
buffer's project, those of one file together in one chunk.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .imports import Definitions, project_root

__all__ = ["LspDefinitions", "MAX_DEFINITIONS", "MAX_TEXT"]

MAX_DEFINITIONS = 8  # per buffer, in the order Lua found them (the newest last)
MAX_TEXT = 4000  # characters of one definition's text


class LspDefinitions:
    """Each buffer's definitions from its language servers, judged by the policy in force."""

    def __init__(self) -> None:
        self._policy: Any = None  # what judged the kept ones (privacy/policy.py's Policy)
        self._kept: dict[int, tuple[tuple[Definitions, tuple[str, ...]], ...]] = {}  # (chunk, its files)
        # what Lua sent, as it sent it, judged again under another policy
        self._sent: dict[int, tuple[str, list[tuple[str, str]]]] = {}

    def put(self, buf: int, path: str, items: list[tuple[str, str]], policy: Any) -> None:
        """The definitions (target file's path, text) found for names near the cursor in
        buffer `buf` (the file at `path`), replacing what was kept for it."""
        self._sent[buf] = (path, items)
        self._policy = policy
        self._kept[buf] = self._judge(path, items, policy)

    def get(self, buf: int, policy: Any) -> tuple[Definitions, ...]:
        """What is kept for `buf`; under another policy than the one that judged it, judged anew."""
        if policy is not self._policy:
            self._policy = policy
            self._kept = {b: self._judge(p, items, policy) for b, (p, items) in self._sent.items()}
        kept = self._kept.get(buf, ())
        if policy is None:
            return tuple(d for d, _ in kept)
        return tuple(d for d, files in kept if all(policy.path_reason(f) is None for f in files))

    def forget(self, buf: int) -> None:
        self._kept.pop(buf, None)
        self._sent.pop(buf, None)

    @staticmethod
    def _judge(path: str, items: list[tuple[str, str]], policy: Any) -> tuple[tuple[Definitions, tuple[str, ...]], ...]:
        root = project_root(path) if path else None
        texts: dict[str, list[str]] = {}  # file name -> its definitions' texts, in order
        files: dict[str, set[str]] = {}  # file name -> the paths it stands for
        for target, text in items[:MAX_DEFINITIONS]:
            text = text[:MAX_TEXT].rstrip("\n")
            if not target or not text.strip():
                continue
            if policy is not None and policy.refusal(target, text.split("\n")) is not None:
                continue
            name = _name(target, root)
            files.setdefault(name, set()).add(target)
            if text not in texts.setdefault(name, []):
                texts[name].append(text)
        return tuple((Definitions(name, "".join(t + "\n" for t in found)), tuple(sorted(files[name])))
                     for name, found in texts.items())


def _name(target: str, root: Path | None) -> str:
    """The target's name relative to the buffer's project, else its own name alone (a path
    outside the project, e.g. a library's, would tell the server where the user's home is)."""
    if root is not None and os.path.isabs(target):
        try:
            rel = Path(target).resolve().relative_to(root)
            return rel.as_posix()
        except (ValueError, OSError):
            pass
    return os.path.basename(target) or target
