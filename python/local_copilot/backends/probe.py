"""What a server tells us about its model, and which FIM template follows from it."""

from __future__ import annotations

import msgspec

from ..config import BackendConfig
from ..errors import ConfigError
from ..prompt.templates import FimTemplate, detect_family, get_template, names

__all__ = ["ModelInfo", "resolve_template"]


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True):
    id: str  # the name the server reports (and expects back in requests)
    owned_by: str = ""  # "vllm", "llamacpp", "ollama", ...
    n_ctx: int | None = None  # context per request (vLLM max_model_len, llama.cpp per-slot n_ctx)
    path: str = ""  # a file or folder name that may name the model better than `id`
    family: str | None = None  # a hint from the server itself (Ollama details.family)


def resolve_template(backend: str, cfg: BackendConfig, model: ModelInfo) -> FimTemplate:
    """The configured template, else the one the model's name implies; never a guess."""
    if cfg.fim_template:
        return get_template(cfg.fim_template)
    for name in (model.id, model.path, model.family or ""):
        family = detect_family(name) if name else None
        if family:
            return get_template(family)
    raise ConfigError(
        f"cannot tell the FIM format of model {model.id!r} on {backend}; set "
        f"backends[{backend!r}].fim_template to one of: {', '.join(names())}"
    )
