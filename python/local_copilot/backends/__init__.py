"""Model-server dialects behind one interface (`Backend.complete`), one record per kind in
the registry (registry.py)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

from . import registry
from .base import Backend, Chunk, FimRequest
from .llama_cpp import LlamaCppBackend
from .ollama import OllamaBackend
from .openai import OpenAIBackend

if TYPE_CHECKING:
    import httpx

    from ..backend_config import BackendConfig

__all__ = ["Backend", "Chunk", "FimRequest", "LlamaCppBackend", "OllamaBackend", "OpenAIBackend", "make_backend",
           "registry"]


# Every module of this package is imported here: a dialect module registers its kind when
# imported (registry.register), so whoever imports the registry (it is in this package) finds
# every built-in kind, and a new kind is its module alone, with no list of them to extend.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


def make_backend(name: str, cfg: BackendConfig, client: httpx.AsyncClient) -> Backend:
    backend: Backend = registry.get(cfg.kind).dialect(name, cfg, client)
    return backend
