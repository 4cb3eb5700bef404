"""A project's ignore file (gitignore syntax): the files it lists are never read or sent."""

from __future__ import annotations

import os
import re

from .globs import glob_parts, glob_regex

__all__ = ["IgnoreFile", "normalized"]


class IgnoreFile:
    """One ignore file in gitignore syntax: the last matching rule decides (`!` re-includes)."""

    def __init__(self, path: str) -> None:
        self.path = path
        root = os.path.dirname(path)
        self.rules: list[tuple[bool, bool, re.Pattern[str]]] = []
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read(256 * 1024)
        except OSError:
            return
        for raw in text.splitlines():
            line = raw.rstrip()
            if not line or line.startswith("#"):
                continue
            neg = line.startswith("!")
            line = line[1:] if neg else line
            line = line.removeprefix("\\")
            _, _, dir_only = glob_parts(line)
            self.rules.append((neg, dir_only, re.compile(glob_regex(line, normalized(root)))))

    def ignores(self, path: str) -> bool:
        hit = False
        for neg, dir_only, rx in self.rules:
            m = rx.match(path)
            if m is None:
                continue
            # a directory-only rule matches files below it, not a file of that name
            if dir_only and not _below_match(rx, path):
                continue
            hit = not neg
        return hit


def _below_match(rx: re.Pattern[str], path: str) -> bool:
    """Whether `rx` matches `path` through one of its parent directories."""
    parent = path.rsplit("/", 1)[0]
    while parent:
        if rx.match(parent):
            return True
        parent = parent.rsplit("/", 1)[0] if "/" in parent else ""
    return False


def normalized(path: str) -> str:
    """`path` as the rules match it: `/` separators, lower case."""
    return path.replace("\\", "/").lower()
