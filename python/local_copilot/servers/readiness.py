"""When a started model server is taken as ready: the path that answers 200 once it takes
requests (the backend registry's) and how long a recipe's server may take to get there."""

from __future__ import annotations

__all__ = ["STARTUP_TIMEOUTS", "ready_path"]

STARTUP_TIMEOUTS = {"llama.cpp": 300.0, "vllm": 600.0, "ollama": 60.0, "custom": 300.0}


def ready_path(recipe: str, kind: str) -> str:
    """Where a server started by `recipe` for an entry of `kind` answers 200 once it takes
    requests, from the backend registry: the path of the kind whose recipe it is, else the
    recipe's own (vLLM's), else the entry kind's (a user command with no known recipe: the
    backend switcher asks the same path of such a server)."""
    from ..backends import registry

    owner = next((k for k in map(registry.get, registry.names()) if k.recipe == recipe), None)
    if owner is not None:
        return owner.ready_path
    return registry.RECIPE_READY_PATHS.get(recipe) or registry.get(kind).ready_path
