"""Model-server dialects behind one interface (`Backend.complete`)."""

from __future__ import annotations

from ..config import BackendConfig
from .base import Backend, Chunk, FimRequest
from .llama_cpp import LlamaCppBackend

__all__ = ["Backend", "Chunk", "FimRequest", "LlamaCppBackend", "make_backend"]


def make_backend(name: str, cfg: BackendConfig, client: object) -> Backend:
    if cfg.kind == "llama.cpp":
        return LlamaCppBackend(name, cfg, client)  # type: ignore[arg-type]
    raise NotImplementedError(f"backend kind {cfg.kind!r} is not implemented yet")
