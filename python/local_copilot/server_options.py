"""How a backend's server is launched and supervised (`backends.NAME.server` in the user's options).

Everything has a default that suits one editor user on one machine; the launch command itself
is `BackendConfig.cmd` when the user wants full control.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from .errors import ConfigError

__all__ = ["ServerOptions", "server_options", "RECIPES"]

RECIPES = ("llama.cpp", "vllm", "ollama")  # servers/recipes.py's own; kinds add theirs (registry.recipes())

PositiveInt = Annotated[int, Meta(gt=0)]
NonNegFloat = Annotated[float, Meta(ge=0)]


class ServerOptions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    # '' = derived from the backend: its kind's (llama.cpp, ollama, sglang, lmstudio), or the name
    # "vllm"; "none" = never start one; else a recipe's name (backends.registry.recipes(),
    # checked where the options are loaded)
    recipe: str = ""
    # what the server loads when it differs from `model` (the name requests carry): a .gguf path,
    # an HF directory or hub id; '' = `model`
    weights: str = ""
    # llama.cpp: a folder of .gguf models served by one router-mode llama-server
    # (`--models-dir`): each is loaded when a request names it (the entry's `model`)
    models_dir: str = ""
    # tokens one request may need (prompt + generation): the per-slot context of llama.cpp and
    # vLLM's --max-model-len (capped at the model's own limit)
    context_tokens: PositiveInt = 8192
    # llama.cpp slots (-np); None: llama-server's own count (servers/recipes.py says why)
    parallel: PositiveInt | None = None
    # vLLM scheduler limits; one editor user needs few sequences, and each one reserves KV cache
    max_num_seqs: PositiveInt = 8
    max_num_batched_tokens: PositiveInt = 4096
    # vLLM --dtype ('' = the model's); "float32" for the tiny CPU test model
    dtype: str = ""
    # overrides the computed vLLM --gpu-memory-utilization (0 = compute it)
    gpu_memory_utilization: Annotated[float, Meta(ge=0, le=1)] = 0.0
    # python of a venv that has vLLM; starts `python -m vllm.entrypoints.openai.api_server`
    python: str = ""
    # a server the plugin started stops this long after the last Neovim using it exits
    keep_alive_s: NonNegFloat = 0.0
    # 0 = by recipe: llama.cpp 300 (the preset may download), vLLM 600, Ollama 60
    startup_timeout_s: NonNegFloat = 0.0
    env: dict[str, str] = {}
    extra_args: list[str] = []
    # crash handling: a server that dies within `quick_failure_s` of starting counts as a quick
    # failure; after `max_restarts` of them in a row the supervisor gives up with an error
    max_restarts: PositiveInt = 5
    restart_backoff_s: Annotated[float, Meta(gt=0)] = 1.0
    quick_failure_s: NonNegFloat = 60.0


def server_options(cfg: Any, raw: Any = None) -> ServerOptions:
    """The options of a backend: `raw` (a dict from a config file) if given, else `cfg.server`
    once BackendConfig has that field, else the defaults."""
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
