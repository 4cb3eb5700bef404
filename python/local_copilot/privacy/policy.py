"""The privacy policy: which buffers' text may go to a model server, in one place.

Every path that sends text asks this module: the typed window and alternatives
(Engine.submit / Engine.alternatives), the speculative request (Engine._speculate), cross-file
chunks and yanks (ContextRing.add), and `local-copilot complete` (it goes through
Engine.submit). Lua is given the path rules compiled to Lua patterns once per configuration
(`lua_rules`), so it stops reading a secret buffer before its text leaves Neovim; the host
decides anyway, and tells Lua why a buffer is off (`status()`, `:LocalCopilot status`,
`:checkhealth`; the per-buffer verdicts are gate.py's, the Lua copy of the built-in rules
lua_rules.py's).

Rules, in the order they are asked (the first that matches is the reason; the lists are
rules.py's, the globs globs.py's, the ignore files ignore_file.py's):

1. path rules, case-insensitive, on the whole path (`\\` counts as `/`): secret directories
   (SECRET_DIRS), secret files below a directory (SECRET_PATHS), credential files of common
   tools and key, certificate and keystore extensions (SECRET_NAMES);
2. the user's `exclude` globs (gitignore-style: a glob without `/` matches a name at any
   depth, `**` crosses directories, a leading `/` or `~/` anchors it to the filesystem);
3. the project ignore files (gitignore syntax, in the file's directory or any directory above
   it; negation with `!`): the plugin's own (IGNORE_FILE, `privacy.ignore_file`) and the ones
   other AI tools read (AI_IGNORE_FILES: JetBrains' `.aiignore`, Gemini's `.aiexclude`,
   Cursor's `.cursorignore`), so a project that says "never send these" to one tool is obeyed
   by this one too;
4. optionally (`privacy.git_ignored`), the files git ignores;
5. content rules on the text that would be sent: a private-key block or a high-confidence
   credential (CONTENT_RULES). Each line is judged once, when it is new (a cache keyed by
   the line's text): a keystroke costs the scan of the one line it changed.

Rules 1-4 judge the path as named and, where it differs, the path it resolves to (its links
followed: `notes.py -> ~/.ssh/config` is the secret file under an ordinary name). A path is
judged once, and again when the editor says the file was written, read or renamed
(`forget_path`). A binary file (binary.py's `binary_reason`: git's rule) is no text to send either; Lua
applies it to the buffer's file, whose encoding only it knows, and the CLI to the file it reads.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from .globs import glob_lua, glob_regex
from .ignore_file import IgnoreFile, normalized
from .rules import AI_IGNORE_FILES, IGNORE_FILE, SECRET_DIRS, SECRET_NAMES, SECRET_PATHS, line_reason

__all__ = ["Policy"]

# Lines judged: the windows of ~8 buffers (~260 lines each). Each keystroke adds its cursor
# line, so a larger cache fills with lines typed past (~170 bytes each); a soak's hit rate is
# 0.992 at 2,048 and 0.994 unbounded.
_LINE_CACHE = 2048
_PATH_CACHE = 1024


class Policy:
    """What may be sent. Built from the options (`exclude`, `privacy`); cheap to ask often."""

    def __init__(self, exclude: Sequence[str] = (), *, ignore_file: str = IGNORE_FILE,
                 git_ignored: bool = False) -> None:
        self.exclude = tuple(exclude)
        self.ignore_file = ignore_file
        self.git_ignored = git_ignored
        rules: list[tuple[str, str]] = []
        rules += [(f"a secret directory ({d}/)", f"{d}/") for d in SECRET_DIRS]
        rules += [(f"a secret file ({p.removesuffix('/**')})", p) for p in SECRET_PATHS]
        rules += [(f"a secret file ({n})", n) for n in SECRET_NAMES]
        # built-in rules and `exclude` globs match at any depth; an `exclude` glob starting
        # with `/` or `~/` names one place
        self._rules: list[tuple[str, str, bool]] = [(reason, glob, True) for reason, glob in rules]
        for g in self.exclude:
            absolute = g.startswith(("/", "~"))
            self._rules.append((f"excluded by your `exclude` glob {g!r}",
                                os.path.expanduser(g) if absolute else g, not absolute))
        self._compiled = [(reason, re.compile(glob_regex(glob.rstrip("/"), anywhere=anywhere)))
                          for reason, glob, anywhere in self._rules]
        self._paths: OrderedDict[str, str | None] = OrderedDict()
        self._lines: OrderedDict[str, str | None] = OrderedDict()
        # lines known to hold no credential: per keystroke the window differs from the last in a
        # line or two, so a set difference (in C) leaves only those for the ordered walk below
        self._clean: set[str] = set()
        self._ignore_files: dict[str, tuple[IgnoreFile, ...]] = {}  # directory -> the ignore files in it

    @classmethod
    def from_config(cls, cfg: Any) -> Policy:
        privacy = getattr(cfg, "privacy", None)
        return cls(getattr(cfg, "exclude", ()),
                   ignore_file=getattr(privacy, "ignore_file", IGNORE_FILE) if privacy else IGNORE_FILE,
                   git_ignored=bool(getattr(privacy, "git_ignored", False)) if privacy else False)

    # -- paths --

    def path_reason(self, path: str) -> str | None:
        """Why the file at `path` must not be sent, or None. An empty path (a new buffer) passes."""
        if not path:
            return None
        got = self._paths.get(path, "")
        if got != "":
            self._paths.move_to_end(path)
            return got
        reason = self._judge_path(path)
        self._paths[path] = reason
        if len(self._paths) > _PATH_CACHE:
            self._paths.popitem(last=False)
        return reason

    def _judge_path(self, path: str) -> str | None:
        """The file's name, then where it resolves (a link, or a linked directory above it):
        `notes.py -> ~/.ssh/config` holds the secret file's text under an ordinary name."""
        reason = self._judge_name(path)
        if reason is not None:
            return reason
        real = _resolved(path)
        if real != path:
            reason = self._judge_name(real)
            if reason is not None:
                return f"resolves to {real}: {reason}"
        return None

    def _judge_name(self, path: str) -> str | None:
        norm = normalized(path)
        if not norm.startswith("/"):
            norm = "/" + norm
        for reason, rx in self._compiled:
            if rx.match(norm):
                return reason
        hit = self._ignored_by_file(path)
        if hit:
            return f"listed in {hit}"
        if self.git_ignored and _git_ignores(path):
            return "ignored by git (privacy.git_ignored)"
        return None

    def _ignore_names(self) -> tuple[str, ...]:
        return (self.ignore_file, *AI_IGNORE_FILES) if self.ignore_file else AI_IGNORE_FILES

    def _ignored_by_file(self, path: str) -> str | None:
        if not os.path.isabs(path):
            return None
        norm = normalized(path)
        d = os.path.dirname(path)
        while True:
            files = self._ignore_files.get(d)
            if files is None:
                files = self._ignore_files[d] = tuple(
                    IgnoreFile(c) for c in (os.path.join(d, n) for n in self._ignore_names()) if os.path.isfile(c))
            for f in files:
                if f.ignores(norm):
                    return f.path
            parent = os.path.dirname(d)
            if parent == d:
                return None
            d = parent

    def forget_paths(self) -> None:
        """An ignore file changed: judge paths anew."""
        self._paths.clear()
        self._ignore_files.clear()

    def forget_path(self, path: str) -> None:
        """The file at `path` was written, read or named anew: judge it (where it resolves, or
        the ignore file it is) again. Paths are judged once, not per keystroke, so a link made
        or changed meanwhile is seen here."""
        if os.path.basename(path) in self._ignore_names():
            self.forget_paths()
        else:
            self._paths.pop(path, None)

    # -- text --

    def text_reason(self, lines: Iterable[str]) -> str | None:
        """Why this text must not be sent (a credential in it), or None."""
        if not isinstance(lines, (list, tuple)):
            lines = list(lines)  # walked twice when a line holds a credential
        clean = self._clean
        fresh = set(lines).difference(clean)
        if not fresh:
            return None
        if all(line_reason(line) is None for line in fresh):
            if len(clean) + len(fresh) > _LINE_CACHE:
                clean.clear()
            clean.update(fresh)
            return None
        cache = self._lines
        for line in lines:
            got = cache.get(line, "")
            if got == "":
                got = line_reason(line)
                cache[line] = got
                if len(cache) > _LINE_CACHE:
                    cache.popitem(last=False)
            if got is not None:
                return got
        return None

    def refusal(self, path: str, lines: Iterable[str]) -> str | None:
        """Why a request with `lines` of the file at `path` must not be sent, or None."""
        reason = self.path_reason(path)
        if reason is not None:
            return reason
        found = self.text_reason(lines)
        return f"the text holds {found}" if found else None

    # -- for Lua --

    def lua_rules(self) -> list[list[str]]:
        """[Lua pattern, reason] pairs for the path rules Lua can check itself (the built-in
        ones and `exclude`); it matches them on `/` .. the lower-cased path with `/` separators."""
        return [[glob_lua(glob.rstrip("/"), anywhere=anywhere), reason] for reason, glob, anywhere in self._rules]



def _resolved(path: str) -> str:
    """The absolute `path` with its links resolved (a missing file below a linked directory,
    or a link to a missing file, too); a relative one as it is (its directory is the editor's)."""
    if not os.path.isabs(path):
        return path
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path



def _git_ignores(path: str) -> bool:
    """`git check-ignore` for the file (False outside a repository or without git)."""
    d = os.path.dirname(path) or "."
    while not os.path.isdir(d) and os.path.dirname(d) != d:  # a new file in a new directory
        d = os.path.dirname(d)
    try:
        done = subprocess.run(["git", "-C", d, "check-ignore", "-q", "--", path],
                              capture_output=True, timeout=2, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
