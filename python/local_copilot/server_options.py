"""How a backend's server is launched and supervised (`backends.NAME.server` in the user's options).

Everything has a default that suits one editor user on one machine; the launch command itself
is `BackendConfig.cmd` when the user wants full control.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .backend_config import ServerOptions
from .errors import ConfigError

__all__ = ["ServerOptions", "server_options", "RECIPES"]

RECIPES = ("llama.cpp", "vllm", "ollama")  # servers/recipes.py's own; kinds add theirs (registry.recipes())


def server_options(cfg: Any, raw: Any = None) -> ServerOptions:
    """The options of a backend (the Struct is backend_config.py's): `raw` (a dict from a
    config file) if given, else `cfg.server` once BackendConfig has that field, else the defaults."""
    if raw is None:
        found = getattr(cfg, "server", None)
        if isinstance(found, ServerOptions):
            return found
        raw = found
    if raw is None or raw == []:  # an empty Lua table arrives as a list
        return ServerOptions()
    try:
        opts = msgspec.convert(raw, ServerOptions, strict=False)
    except msgspec.ValidationError as exc:
        msg = str(exc)
        raise ConfigError(msg.replace("`$", "`$.server") if "`$" in msg else f"{msg} - at `$.server`") from None
    from .backends import registry

    registry.check_recipe(opts.recipe, "$.server.recipe")
    return opts
