"""What a launch recipe needs found on this machine (servers/recipes.py `probe_host` finds it,
`build_recipe` reads it): where the server programs are, the GPUs, the model's config.json."""

from __future__ import annotations

from typing import Any

import msgspec

from .memory import GpuMemory
from .programs import VllmLauncher

__all__ = ["HostFacts"]


class HostFacts(msgspec.Struct, kw_only=True):
    llama_server: str | None = None
    vllm: VllmLauncher | None = None
    ollama: str | None = None
    # None: no nvidia-smi (or it failed) = no usable NVIDIA GPU
    gpus: list[GpuMemory] | None = None
    # the vLLM model when it is on this machine
    model_dir: str | None = None
    model_config: dict[str, Any] | None = None
    model_weights: int = 0
    env: dict[str, str] = {}  # the environment the server will get (CUDA_VISIBLE_DEVICES, ...)
    path: str = ""  # PATH where a kind's own launch looks for its program ('' = this process's)
