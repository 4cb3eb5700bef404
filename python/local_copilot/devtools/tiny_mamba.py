"""A tiny Mamba model (llama.cpp architecture ``mamba``) as a GGUF file llama-server loads: a
recurrent model, for the checks that tell where the server cannot reuse chunks of a cached
prompt. Random weights (seeded; its text is noise), the tiny Qwen2 model's byte-level BPE
vocabulary with Qwen's FIM markers.

    python -m local_copilot.devtools.tiny_mamba OUT.gguf
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from . import tiny_model
from .qwen2_gguf import EOS, FIM_MARKERS

__all__ = ["write_mamba_gguf"]

N_EMBD = 64
N_LAYER = 2
D_STATE = 8
D_CONV = 4


def write_mamba_gguf(path: str | os.PathLike[str], seed: int = 0) -> Path:
    """Write the model to `path` (atomically: a reader never sees half a file)."""
    import gguf  # test/dev dependency only

    path = Path(path)
    d_inner, dt_rank = 2 * N_EMBD, max(1, N_EMBD // 16)
    toks = tiny_model.vocab()
    ids = {t: i for i, t in enumerate(toks)}
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    w = gguf.GGUFWriter(tmp, "mamba")
    w.add_name("tiny-mamba")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(tiny_model.N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(0)  # no attention, no feed-forward: Mamba's blocks are the SSM
    w.add_head_count(0)
    w.add_ssm_conv_kernel(D_CONV)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(D_STATE)
    w.add_ssm_time_step_rank(dt_rank)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(toks)
    w.add_token_types([gguf.TokenType.CONTROL if t in tiny_model.SPECIALS else gguf.TokenType.NORMAL for t in toks])
    w.add_token_merges(list(tiny_model.MERGES))
    w.add_bos_token_id(ids[EOS])
    w.add_eos_token_id(ids[EOS])
    w.add_add_bos_token(False)
    for attr, tok in FIM_MARKERS.items():
        key = getattr(gguf.Keys.Tokenizer, attr, None)
        if key is not None:
            w.add_uint32(key, ids[tok])
    rng = np.random.default_rng(seed)

    def noise(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    # numpy shapes are llama.cpp's tensor dimensions reversed
    w.add_tensor("token_embd.weight", noise(len(toks), N_EMBD))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, np.float32))
    for i in range(N_LAYER):
        blk = f"blk.{i}."
        w.add_tensor(blk + "attn_norm.weight", np.ones(N_EMBD, np.float32))
        w.add_tensor(blk + "ssm_in.weight", noise(2 * d_inner, N_EMBD))
        w.add_tensor(blk + "ssm_conv1d.weight", noise(d_inner, D_CONV))
        w.add_tensor(blk + "ssm_conv1d.bias", np.zeros(d_inner, np.float32))
        w.add_tensor(blk + "ssm_x.weight", noise(dt_rank + 2 * D_STATE, d_inner))
        w.add_tensor(blk + "ssm_dt.weight", noise(d_inner, dt_rank))
        w.add_tensor(blk + "ssm_dt.bias", np.zeros(d_inner, np.float32))
        w.add_tensor(blk + "ssm_a", -np.ones((d_inner, D_STATE), np.float32))
        w.add_tensor(blk + "ssm_d", np.ones(d_inner, np.float32))
        w.add_tensor(blk + "ssm_out.weight", noise(N_EMBD, d_inner))
    try:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
    finally:
        w.close()
    os.replace(tmp, path)
    return path


if __name__ == "__main__":
    write_mamba_gguf(sys.argv[1])
