"""`auto`: pick the backend from the hardware, by the users' rule of thumb.

The model fits entirely in free GPU memory and vLLM is installed -> vLLM (continuous batching,
fast on a GPU); otherwise llama.cpp (CPU, or GPU with part of the layers offloaded, and far
less memory). "Fits" uses the same arithmetic that sizes vLLM's --gpu-memory-utilization, so
auto never picks a vLLM that then refuses to start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from ..errors import LocalCopilotError
from ..server_options import ServerOptions, server_options
from .memory import (
    GpuMemory,
    MemoryPlan,
    find_model_dir,
    model_shape,
    pick_gpu,
    plan_vllm_memory,
    query_gpus,
    read_config,
    weights_bytes,
)
from .programs import find_vllm

__all__ = ["BackendChoice", "choose_backend", "detect_backend"]


class BackendChoice(msgspec.Struct, frozen=True, kw_only=True):
    backend: Literal["vllm", "llama.cpp"]
    reason: str  # one line for the user: why this one
    plan: MemoryPlan | None = None


def choose_backend(*, gpus: list[GpuMemory] | None, vllm_installed: bool, model: str = "",
                   config: Mapping[str, Any] | None = None, weights: int = 0,
                   options: ServerOptions | None = None, env: Mapping[str, str] | None = None) -> BackendChoice:
    """Pure: the choice from what was found. `gpus` None = no nvidia-smi; `config`/`weights` are
    the vLLM model's config.json and weight size (None/0 = not on this machine)."""
    opts = options or ServerOptions()
    gpu = pick_gpu(gpus, env if env is not None else {})
    if gpu is None:
        why = "no NVIDIA GPU found (nvidia-smi missing or no device)" if not gpus else "CUDA_VISIBLE_DEVICES hides the GPU"
        return BackendChoice(backend="llama.cpp", reason=f"llama.cpp: {why}; llama.cpp runs on the CPU")
    if not vllm_installed:
        return BackendChoice(backend="llama.cpp", reason=(
            "llama.cpp: vLLM is not installed (make vllm, or pip install vllm); llama.cpp uses the GPU "
            f"with {gpu.free_mib / 1024:.1f} GiB free"))
    if not model or not config or not weights:
        what = f"vLLM's model {model!r} is not on this machine" if model else "no model is configured for vLLM"
        return BackendChoice(backend="llama.cpp", reason=f"llama.cpp: {what}, so whether it fits is unknown")
    shape = model_shape(config, opts.dtype)
    max_len = min(opts.context_tokens, shape.max_position_embeddings or opts.context_tokens)
    plan = plan_vllm_memory(shape, weights, gpu, max_model_len=max_len, max_num_seqs=opts.max_num_seqs,
                            max_num_batched_tokens=opts.max_num_batched_tokens)
    if plan.fits:
        return BackendChoice(backend="vllm", plan=plan, reason=f"vllm: {model} fits in GPU memory: {plan.reason}")
    return BackendChoice(backend="llama.cpp", plan=plan,
                         reason=f"llama.cpp (partial offload): {model} does not fit in free GPU memory for vLLM: "
                                f"{plan.reason}")


def detect_backend(backends: Mapping[str, Any], *, vllm: str = "vllm", options: ServerOptions | None = None,
                   env: Mapping[str, str] | None = None) -> BackendChoice:
    """Look at this machine (nvidia-smi, vLLM's install, the vLLM backend's model on disk) and
    choose. `backends` maps names to BackendConfig; `vllm` names the vLLM one."""
    cfg = backends.get(vllm)
    opts = options or (server_options(cfg) if cfg is not None else ServerOptions())
    model = (opts.weights or cfg.model) if cfg is not None else ""
    gpus = query_gpus()
    try:
        installed = gpus is not None and find_vllm(opts.python, env) is not None
    except LocalCopilotError:
        installed = False
    config: dict[str, Any] | None = None
    weights = 0
    model_dir = find_model_dir(model, env) if model and gpus else None
    if model_dir is not None:
        try:
            config = read_config(model_dir)
        except (OSError, ValueError):
            config = None
        weights = weights_bytes(model_dir)
    return choose_backend(gpus=gpus, vllm_installed=installed, model=model, config=config, weights=weights,
                          options=opts, env=os.environ if env is None else env)
