"""One record per backend kind: everything the rest of the plugin needs to know about it.

A backend's `kind` (its options' `kind` field) names a record here: the dialect that speaks to
the server, where such a server listens by default, the path that answers once it is ready,
and the launch recipe that starts one (servers/recipes.py, which also says what to install
when its program is missing). The engine, the backend switcher, the supervisor and :checkhealth ask the registry;
none of them names a kind. A new kind is one module that calls `register()` at import, plus
its tests and docs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

    from ..config import BackendConfig
    from .base import Backend

__all__ = ["Kind", "get", "names", "register"]


@dataclass(frozen=True, kw_only=True)
class Kind:
    name: str  # the `kind` option's value
    # the dialect: Backend(name, its BackendConfig, the host's httpx client)
    dialect: Callable[[str, BackendConfig, httpx.AsyncClient], Backend]
    default_url: str  # where such a server listens unless the options say otherwise
    # a cheap GET that answers 200 once the server takes requests (supervisor, switcher, health)
    ready_path: str
    recipe: str = ""  # the built-in launch recipe that starts one ('' = none; servers/recipes.py)


_KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Add (or replace) a kind; returns it."""
    _KINDS[kind.name] = kind
    return kind


def get(name: str) -> Kind:
    """The record of kind `name` (KeyError when none is registered: config validates first)."""
    _load_builtins()
    return _KINDS[name]


def names() -> list[str]:
    _load_builtins()
    return sorted(_KINDS)


def _load_builtins() -> None:
    # the built-in dialect modules register themselves when imported
    from . import llama_cpp, ollama, openai  # noqa: F401
