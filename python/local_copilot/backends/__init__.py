"""Model-server dialects behind one interface (`Backend.complete`), one record per kind in
the registry (registry.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

# the built-in dialect modules register their kinds when imported: whoever imports the
# registry (it is in this package) finds them there
from . import lmstudio, registry, sglang  # noqa: F401  (lmstudio, sglang: registered)
from .base import Backend, Chunk, FimRequest
from .llama_cpp import LlamaCppBackend
from .ollama import OllamaBackend
from .openai import OpenAIBackend

if TYPE_CHECKING:
    import httpx

    from ..backend_config import BackendConfig

__all__ = ["Backend", "Chunk", "FimRequest", "LlamaCppBackend", "OllamaBackend", "OpenAIBackend", "make_backend",
           "registry"]


def make_backend(name: str, cfg: BackendConfig, client: httpx.AsyncClient) -> Backend:
    backend: Backend = registry.get(cfg.kind).dialect(name, cfg, client)
    return backend
