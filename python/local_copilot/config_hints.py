"""The way out of a bad option: msgspec says what is wrong ("Object contains unknown field
`n_predic`", "Invalid enum value 'warning'"); the user also needs what is right. This adds the
nearest valid name (a typo is the usual cause) and, for a choice, every value it takes.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable
from typing import Any

import msgspec

__all__ = ["hint", "nearest", "suggestion"]

_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]*)`(?: - at `(?P<at>[^`]*)`)?$")
_ENUM = re.compile(r"^Invalid enum value (?P<value>.*?)(?: - at `(?P<at>[^`]*)`)?$")


def nearest(name: str, choices: Iterable[str]) -> str | None:
    """The choice `name` most likely misspells, or None when none is close.

    >>> nearest("n_predic", ["n_predict", "max_lines"]), nearest("zzz", ["accept"])
    ('n_predict', None)
    """
    found = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    if not found:  # a different case, or a prefix ('acc' for 'accept'), is as likely a slip
        lowered = [c for c in choices if c.lower() == name.lower() or (len(name) >= 3 and c.startswith(name))]
        found = lowered[:1]
    return found[0] if found else None


def suggestion(name: str, choices: Iterable[str]) -> str:
    """'; did you mean `x`?' for the nearest choice, else '; valid names: a, b, c'."""
    choices = list(choices)
    near = nearest(name, choices)
    if near is not None:
        return f"; did you mean `{near}`?"
    return "; valid names: " + ", ".join(choices)


def _unwrap(typ: Any) -> Any:
    """The type under Annotated[...] and Optional[...], where one Struct or Literal is meant."""
    while typing.get_origin(typ) is typing.Annotated:
        typ = typing.get_args(typ)[0]
    if typing.get_origin(typ) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(typ) if a is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return typ


def _is_struct(typ: Any) -> bool:
    return isinstance(typ, type) and issubclass(typ, msgspec.Struct)


def _type_at(typ: Any, at: str) -> Any:
    """The type at msgspec's path `at` (`$`, `$.context`, `$.server`) inside `typ`, or None."""
    typ = _unwrap(typ)
    for part in [p for p in re.split(r"\.|\[[^\]]*\]", at.removeprefix("$")) if p]:
        if not _is_struct(typ):
            return None
        field = next((f for f in msgspec.structs.fields(typ) if f.encode_name == part), None)
        if field is None:
            return None
        typ = _unwrap(field.type)
    return typ


def hint(message: str, typ: Any) -> str:
    """What to add to msgspec's `message` about a value converted to `typ` ('' for nothing):
    the field meant for an unknown one, the values a choice takes.

    >>> from local_copilot.config import Config
    >>> hint("Object contains unknown field `n_predic`", Config)
    '; did you mean `n_predict`?'
    """
    unknown = _UNKNOWN.match(message)
    if unknown:
        struct = _type_at(typ, unknown.group("at") or "$")
        if _is_struct(struct):
            return suggestion(unknown.group("name"), [f.encode_name for f in msgspec.structs.fields(struct)])
        return ""
    enum = _ENUM.match(message)
    if enum and enum.group("at"):
        choice = _type_at(typ, enum.group("at"))
        if typing.get_origin(choice) is typing.Literal:
            values = [str(v) for v in typing.get_args(choice)]
            near = nearest(enum.group("value").strip("'\""), [v for v in values if v])
            listed = ", ".join(repr(v) for v in values)
            return f"; did you mean {near!r}? It takes one of: {listed}" if near else f"; choose one of: {listed}"
    return ""
