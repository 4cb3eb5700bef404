"""Model-server dialects behind one interface (`Backend.complete`), one record per kind in
the registry (registry.py)."""

from __future__ import annotations

import httpx

from ..config import BackendConfig
from . import registry
from .base import Backend, Chunk, FimRequest
from .llama_cpp import LlamaCppBackend
from .ollama import OllamaBackend
from .openai import OpenAIBackend

__all__ = ["Backend", "Chunk", "FimRequest", "LlamaCppBackend", "OllamaBackend", "OpenAIBackend", "make_backend",
           "registry"]


def make_backend(name: str, cfg: BackendConfig, client: httpx.AsyncClient) -> Backend:
    return registry.get(cfg.kind).dialect(name, cfg, client)
