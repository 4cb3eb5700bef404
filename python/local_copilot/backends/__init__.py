"""Model-server dialects behind one interface (`Backend.complete`)."""

from __future__ import annotations

import httpx

from ..config import BackendConfig
from .base import Backend, Chunk, FimRequest
from .llama_cpp import LlamaCppBackend
from .ollama import OllamaBackend
from .openai import OpenAIBackend

__all__ = ["Backend", "Chunk", "FimRequest", "LlamaCppBackend", "OllamaBackend", "OpenAIBackend", "make_backend"]


def make_backend(name: str, cfg: BackendConfig, client: httpx.AsyncClient) -> Backend:
    if cfg.kind == "openai":
        return OpenAIBackend(name, cfg, client)
    if cfg.kind == "ollama":
        return OllamaBackend(name, cfg, client)
    return LlamaCppBackend(name, cfg, client)
