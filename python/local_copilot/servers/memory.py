"""GPU memory: read it from nvidia-smi, and size vLLM's share of it for one model.

vLLM's `--gpu-memory-utilization` is the fraction of the GPU's *total* memory the server may
take (weights + activations + KV cache); it pre-allocates all of it, and at startup it refuses
to run when the free memory is below that fraction. The default (0.9) takes a whole card for a
1.5B model, which is what users complained about. So we compute what the settings need:

    weights   size of the weight files on disk
    kv cache  2 (K and V) * layers * kv_heads * head_dim * dtype bytes, per token,
              * max_model_len * max_num_seqs (every sequence may fill its context)
    act.      one prefill step of max_num_batched_tokens through the MLP, plus the logits
    overhead  CUDA context, cuBLAS workspaces, CUDA graphs: 1 GiB + 5% of the weights

and ask for that fraction of the total, rounded up to 0.01, never more than what is free.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

__all__ = [
    "GiB",
    "MiB",
    "NVIDIA_SMI_QUERY",
    "GpuMemory",
    "ModelShape",
    "MemoryPlan",
    "parse_nvidia_smi",
    "query_gpus",
    "pick_gpu",
    "model_shape",
    "weights_bytes",
    "find_model_dir",
    "plan_vllm_memory",
    "fmt_gib",
]

MiB = 1024**2
GiB = 1024**3

NVIDIA_SMI_QUERY = ["--query-gpu=memory.total,memory.used,memory.free", "--format=csv,noheader,nounits"]

# fixed part of the overhead; measured CUDA contexts + graphs of small models sit well below it
BASE_OVERHEAD = 1 * GiB
# what we leave free beyond the plan when clamping to the free memory (other programs grow)
FREE_HEADROOM = 256 * MiB

_DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "bf16": 2,
    "float8": 1, "fp8": 1, "int8": 1,
}


class GpuMemory(msgspec.Struct, frozen=True):
    """One line of nvidia-smi's memory query, in MiB as it reports them."""

    index: int
    total_mib: int
    used_mib: int
    free_mib: int

    @property
    def total(self) -> int:
        return self.total_mib * MiB

    @property
    def free(self) -> int:
        return self.free_mib * MiB


def parse_nvidia_smi(text: str) -> list[GpuMemory]:
    """Parse `nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv,noheader,nounits`.

    >>> parse_nvidia_smi("24564, 507, 23650\\n")
    [GpuMemory(index=0, total_mib=24564, used_mib=507, free_mib=23650)]
    """
    gpus: list[GpuMemory] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            continue
        try:
            total, used, free = (int(float(p)) for p in parts)
        except ValueError:  # "[N/A]" on some virtual GPUs, or a stray warning line
            continue
        gpus.append(GpuMemory(len(gpus), total, used, free))
    return gpus


def query_gpus(nvidia_smi: str | None = None, timeout: float = 10.0) -> list[GpuMemory] | None:
    """The GPUs nvidia-smi sees; None when there is no nvidia-smi or it fails (no driver)."""
    exe = nvidia_smi or shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return parse_nvidia_smi(out.stdout)


def pick_gpu(gpus: list[GpuMemory] | None, env: Mapping[str, str] | None = None) -> GpuMemory | None:
    """The GPU vLLM will use: the first one CUDA_VISIBLE_DEVICES names (by index), else GPU 0."""
    if not gpus:
        return None
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        first = visible.split(",")[0].strip()
        if first == "" or first == "-1":
            return None  # hidden on purpose: CPU
        if first.isdigit():
            idx = int(first)
            return gpus[idx] if idx < len(gpus) else None
        # GPU UUIDs: we cannot map them without another query; assume the first
    return gpus[0]


class ModelShape(msgspec.Struct, frozen=True):
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes


def dtype_bytes(name: str, default: int = 2) -> int:
    return _DTYPE_BYTES.get(str(name).lower().removeprefix("torch."), default)


def model_shape(config: Mapping[str, Any], dtype: str = "") -> ModelShape:
    """The numbers the sizing needs, from an HF config.json (multimodal ones nest `text_config`)."""
    cfg: Mapping[str, Any] = config.get("text_config") or config
    heads = int(cfg.get("num_attention_heads") or 1)
    hidden = int(cfg.get("hidden_size") or 0)
    head_dim = int(cfg.get("head_dim") or (hidden // heads if hidden else 0))
    want = dtype if dtype and dtype != "auto" else (cfg.get("dtype") or cfg.get("torch_dtype")
                                                    or config.get("dtype") or config.get("torch_dtype") or "bfloat16")
    return ModelShape(
        layers=int(cfg.get("num_hidden_layers") or 0),
        kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=head_dim,
        dtype_bytes=dtype_bytes(want),
        hidden_size=hidden,
        intermediate_size=int(cfg.get("intermediate_size") or 4 * hidden),
        vocab_size=int(cfg.get("vocab_size") or 0),
        max_position_embeddings=int(cfg.get("max_position_embeddings") or 0),
    )


def weights_bytes(model_dir: str | os.PathLike[str]) -> int:
    """Size of the weight files (safetensors preferred: repos often also carry .bin copies)."""
    d = Path(model_dir)
    for pattern in ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf"):
        files = [f for f in d.glob(pattern) if f.is_file() and not f.name.startswith("training_args")]
        if files:
            return sum(f.stat().st_size for f in files)  # stat follows the HF cache's blob symlinks
    return 0


def find_model_dir(model: str, env: Mapping[str, str] | None = None) -> Path | None:
    """A local directory with the model's config.json: the path itself, or the hub id's snapshot
    in the Hugging Face cache. None when the model is not on this machine."""
    if not model:
        return None
    p = Path(model).expanduser()
    if p.is_dir():
        return p if (p / "config.json").exists() else None
    if model.count("/") != 1 or p.exists():
        return None
    env = os.environ if env is None else env
    hub = env.get("HF_HUB_CACHE") or os.path.join(
        env.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "hub")
    repo = Path(hub) / ("models--" + model.replace("/", "--"))
    ref = repo / "refs" / "main"
    candidates = []
    if ref.is_file():
        candidates.append(repo / "snapshots" / ref.read_text().strip())
    snapshots = repo / "snapshots"
    if snapshots.is_dir():
        candidates += sorted(snapshots.iterdir(), key=lambda s: s.stat().st_mtime, reverse=True)
    for snap in candidates:
        if (snap / "config.json").exists():
            return snap
    return None


def read_config(model_dir: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((model_dir / "config.json").read_text())
    return config


class MemoryPlan(msgspec.Struct, frozen=True):
    weights: int
    kv_cache: int
    activations: int
    overhead: int
    need: int  # the sum
    gpu_total: int
    gpu_free: int
    fits: bool
    utilization: float  # for --gpu-memory-utilization; 0 when it does not fit
    max_num_seqs_that_fit: int  # at this max_model_len (0: not even one sequence)
    reason: str


def fmt_gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


def plan_vllm_memory(shape: ModelShape, weights: int, gpu: GpuMemory, *, max_model_len: int, max_num_seqs: int,
                     max_num_batched_tokens: int) -> MemoryPlan:
    """Size vLLM on one GPU. Pure arithmetic; see the module docstring for the terms."""
    per_seq = shape.kv_bytes_per_token * max_model_len
    kv = per_seq * max_num_seqs
    act_bytes = max(shape.dtype_bytes, 2)
    activations = (max_num_batched_tokens * (2 * shape.intermediate_size + 4 * shape.hidden_size) * act_bytes
                   + max_num_seqs * shape.vocab_size * 4)  # float32 logits of the sampled positions
    overhead = BASE_OVERHEAD + weights // 20
    need = weights + kv + activations + overhead
    total, free = gpu.total, gpu.free
    fixed = weights + activations + overhead
    usable = free - FREE_HEADROOM
    seqs_fit = max(0, int((usable - fixed) // per_seq)) if per_seq else 0
    breakdown = (f"weights {fmt_gib(weights)} + KV cache {fmt_gib(kv)} ({max_num_seqs} x {max_model_len} tokens) "
                 f"+ activations/overhead {fmt_gib(activations + overhead)}")
    if total <= 0 or need > usable:
        hint = (f"; lower max_num_seqs to {seqs_fit} or max_model_len" if seqs_fit >= 1
                else "; the weights alone do not fit: use llama.cpp (partial offload) or a smaller model")
        return MemoryPlan(weights, kv, activations, overhead, need, total, free, False, 0.0, seqs_fit,
                          f"needs {fmt_gib(need)} ({breakdown}) but GPU {gpu.index} has {fmt_gib(free)} free"
                          f" of {fmt_gib(total)}{hint}")
    util = math.ceil(need / total * 100) / 100
    # vLLM refuses to start when util * total exceeds the free memory; rounding may cross it
    util = min(util, math.floor(usable / total * 100) / 100)
    util = max(util, math.ceil(need / total * 1000) / 1000)  # never below the need itself
    return MemoryPlan(weights, kv, activations, overhead, need, total, free, True, round(util, 3), seqs_fit,
                      f"needs {fmt_gib(need)} ({breakdown}); GPU {gpu.index} has {fmt_gib(free)} free of "
                      f"{fmt_gib(total)} -> --gpu-memory-utilization {round(util, 3)}")
