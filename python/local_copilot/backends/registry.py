"""One record per backend kind: everything the rest of the plugin needs to know about it.

A backend's `kind` (its options' `kind` field) names a record here: the dialect that speaks to
the server, where such a server listens by default, the path that answers once it is ready,
and the launch recipe that starts one (servers/recipes.py; servers/programs.py says what to
install when its program is missing; a kind may bring its recipe along: `launch`, and the command that
starts one by hand: `manual`), what only such a server answers (`signature`: detect.py tells
the kinds apart by it) or answers among others (`guess_path`), whether it has a built-in
backend entry of its own name, and its chat dialect (instruction edits). The engine, the
backend switcher, the supervisor, instruction edits and :checkhealth ask the registry; none of
them names a kind. A new kind is one module that calls `register()` at import (imported by
the package's __init__.py, so whoever imports the registry finds every built-in kind), plus
its tests and docs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..backend_config import DEFAULT_KIND
from ..errors import ConfigError

if TYPE_CHECKING:
    import httpx

    from ..backend_config import BackendConfig

__all__ = ["Kind", "Signature", "builtin_entries", "check_entries", "check_recipe", "get", "launcher", "names",
           "recipes", "register"]

# the launch recipes servers/recipes.py knows itself; a kind's `launch` adds its own
BUILTIN_RECIPES = ("llama.cpp", "vllm", "ollama")
# the ready path of a launch recipe that no kind owns (a kind's recipe is ready at the kind's
# `ready_path`): vLLM serves the openai kind, whose /v1/models asks for the API key vLLM was
# started with, while its /health answers anyone once the model is loaded
RECIPE_READY_PATHS = {"vllm": "/health"}


@dataclass(frozen=True)
class Signature:
    """What only a server of this kind answers: GET `path`, and `says(doc)` on its JSON
    answer (a dict or list) returns one line naming the server, or None when it is another."""

    path: str
    says: Callable[[Any], str | None]


@dataclass(frozen=True, kw_only=True)
class Kind:
    name: str  # the `kind` option's value
    # the dialect: base.py's Backend(name, its BackendConfig, the host's httpx client). Typed as
    # Any here: the dialects import the registry to register, so it names none of their classes
    dialect: Callable[[str, BackendConfig, httpx.AsyncClient], Any]
    default_url: str  # where such a server listens unless the options say otherwise
    # a cheap GET that answers 200 once the server takes requests (supervisor, switcher, health)
    ready_path: str
    recipe: str = ""  # the built-in launch recipe that starts one ('' = none; servers/recipes.py)
    # the recipe itself when it is not one servers/recipes.py knows: (entry name, its
    # BackendConfig, its ServerOptions, port, servers.host_facts.HostFacts) -> servers.recipes.Recipe;
    # raises ServerStartError
    launch: Callable[..., Any] | None = None
    signature: Signature | None = None
    # a GET that such a server answers with 200, though not only it (llama-server's /props):
    # where no signature tells, a bare URL that answers it is taken for this kind (detect.py)
    guess_path: str = ""
    # the kind of a server that no other kind claims (any OpenAI-compatible server)
    generic: bool = False
    # the command that starts such a server by hand, for :checkhealth's advice when none answers:
    # (the model, '' when none is configured; the port) -> a command line (a kind with `launch`)
    manual: Callable[[str, int], str] | None = None
    # a built-in backend entry named as the kind, at default_url (`backend = 'sglang'`)
    builtin: bool = False
    # the chat dialect for instruction edits (chat.py's ChatBackend or a subclass): Backend(name,
    # its BackendConfig, the host's httpx client, timeout_s=...); None: the server has none known
    chat: Callable[..., Any] | None = None


_KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Add (or replace) a kind; returns it."""
    _KINDS[kind.name] = kind
    return kind


def get(name: str) -> Kind:
    """The record of kind `name` (KeyError when none is registered: config validates first)."""
    return _KINDS[name]


def names() -> list[str]:
    return sorted(_KINDS)


def recipes() -> list[str]:
    """Every launch recipe's name: servers/recipes.py's and the kinds' own."""
    return [*BUILTIN_RECIPES, *sorted({k.recipe for k in _KINDS.values() if k.launch is not None})]


def launcher(recipe: str) -> Callable[..., Any] | None:
    """The `launch` of the kind whose recipe is `recipe`, None for servers/recipes.py's own."""
    return next((k.launch for k in _KINDS.values() if k.recipe == recipe and k.launch is not None), None)


def check_recipe(recipe: str, path: str) -> None:
    """ConfigError naming `path` unless `recipe` is '' (by kind), 'none' or a known recipe."""
    known = recipes()
    if recipe not in ("", "none", *known):
        raise ConfigError(f"unknown recipe {recipe!r} - at `{path}`; choose one of: {', '.join(known)}, none")


def builtin_entries() -> dict[str, dict[str, Any]]:
    """A backend entry for each kind that brings its own (`Kind.builtin`: `sglang`,
    `lmstudio`), named as the kind, at the kind's default URL (config.py adds the others)."""
    return {k.name: {"kind": k.name, "url": k.default_url} for k in sorted(_KINDS.values(), key=lambda k: k.name)
            if k.builtin}


def check_entries(backends: dict[str, Any], builtins: dict[str, dict[str, Any]]) -> None:
    """The backend entries of the options, as given (the built-in entries `builtins` merged in):
    ConfigError naming the first whose kind no record has, and the kinds there are; an entry
    without a URL gets its kind's default one (in place)."""
    kinds = names()
    for name, value in backends.items():
        if not isinstance(value, dict):
            continue
        kind = value.get("kind", DEFAULT_KIND)
        if kind not in kinds:
            # a built-in entry's name given as a kind ('vllm') says which kind that server speaks
            meant = builtins.get(kind, {}).get("kind") if isinstance(kind, str) else None
            why = f"; {kind!r} servers speak kind {meant!r}" if meant and meant != kind else ""
            raise ConfigError(f"unknown kind {kind!r} - at `$.backends.{name}.kind`{why}; choose one of: {', '.join(kinds)}")
        if "url" not in value:
            value["url"] = get(kind).default_url
