"""Gitignore-style globs, translated once into the two dialects that match them: Python's `re`
(the host decides) and Lua patterns (Lua stops reading a refused buffer before the host has
spoken; lua_rules.py, privacy.lua)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["glob_lua", "glob_parts", "glob_regex"]


def glob_parts(glob: str) -> tuple[list[tuple[str, str]], bool, bool]:
    """Tokens of a gitignore-style glob (('lit', c) | ('star',) | ('dstar',) | ('any',) |
    ('class', body)), whether it is anchored (has a `/` before its end) and whether it names
    a directory only (ends with `/`)."""
    dir_only = glob.endswith("/")
    glob = glob.rstrip("/")
    anchored = "/" in glob
    glob = glob.lstrip("/")
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**", i):
            tokens.append(("dstar", ""))
            i += 2
            if i < len(glob) and glob[i] == "/":
                tokens.append(("dstar/", ""))
                tokens.pop(-2)
                i += 1
        elif c == "*":
            tokens.append(("star", ""))
            i += 1
        elif c == "?":
            tokens.append(("any", ""))
            i += 1
        elif c == "[" and "]" in glob[i + 2:]:
            end = glob.index("]", i + 2)
            tokens.append(("class", glob[i + 1:end]))
            i = end + 1
        elif c == "\\" and i + 1 < len(glob):
            tokens.append(("lit", glob[i + 1]))
            i += 2
        else:
            tokens.append(("lit", c))
            i += 1
    return tokens, anchored, dir_only


def glob_regex(glob: str, root: str = "", *, anywhere: bool | None = None) -> str:
    """A Python regex for `glob` on a lower-cased `/`-separated absolute path. As in gitignore,
    a glob without a `/` (but a trailing one) matches at any depth below `root`, one with a
    `/` matches the path below `root`; `anywhere` says which instead. It matches the named
    file and everything below it (a directory's files)."""
    tokens, anchored, _ = glob_parts(glob.lower())
    if anywhere is not None:
        anchored = not anywhere
    out = _translate(tokens, _REGEX)
    base = re.escape(root.lower().rstrip("/")) + "/"
    lead = base if anchored else base + "(?:.*/)?"
    return "^" + lead + "".join(out) + "(?:/.*)?$"


_LUA_MAGIC = set("^$()%.[]*+-?")

# each glob token in a dialect: Python's re, and Lua patterns ("dstar/" first: what a leading
# `**/` becomes; "escape": how a character class escapes its escape character)
_REGEX: dict[str, Any] = {"lit": re.escape, "star": "[^/]*", "any": "[^/]", "dstar": ".*", "dstar/": "(?:.*/)?",
                          "dstar/ first": "(?:.*/)?", "escape": ("\\", "\\\\")}
_LUA: dict[str, Any] = {"lit": lambda c: "%" + c if c in _LUA_MAGIC else c, "star": "[^/]*", "any": "[^/]",
                        "dstar": ".*", "dstar/": ".*/", "dstar/ first": "", "escape": ("%", "%%")}


def _translate(tokens: list[tuple[str, str]], dialect: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for kind, body in tokens:
        if kind == "lit":
            out.append(dialect["lit"](body))
        elif kind == "class":
            neg = body.startswith(("!", "^"))
            body = body[1:] if neg else body
            out.append("[" + ("^" if neg else "") + body.replace(*dialect["escape"]) + "]")
        elif kind == "dstar/" and not out:
            out.append(dialect["dstar/ first"])
        else:
            out.append(dialect[kind])
    return out


def glob_lua(glob: str, *, anywhere: bool = True) -> str:
    """glob_regex(glob, anywhere=anywhere) as a Lua pattern for `string.find` on `/` .. the
    lower-cased path, to be followed by `$` (the file) or `/` (anything below it). Lua
    patterns have no optional groups: a `**/` is dropped where it leads and matches one or
    more directories elsewhere (the host, which decides, also matches none)."""
    out = _translate(glob_parts(glob.lower())[0], _LUA)
    return ("^/" if not anywhere else "/") + "".join(out)
