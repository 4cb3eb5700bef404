"""The GGUF file of a generated Qwen2-architecture model: what every model the project
generates shares (tiny_model, token_phrase_model, real_shape_model): the hyperparameters, a
byte-level BPE tokenizer whose end and FIM markers are Qwen's tokens, and an atomic write (a
reader never sees half a file). Each generator adds its own tensors.

    with qwen2_writer(path, hparams, tokens, types, merges, ids) as w:
        w.add_tensor(...)
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["FIM_MARKERS", "Qwen2Params", "qwen2_writer"]

EOS = "<|endoftext|>"
# gguf's tokenizer keys for Qwen's FIM markers: llama-server reads the FIM tokens from these
FIM_MARKERS = {
    "FIM_PRE_ID": "<|fim_prefix|>",
    "FIM_SUF_ID": "<|fim_suffix|>",
    "FIM_MID_ID": "<|fim_middle|>",
    "FIM_PAD_ID": "<|fim_pad|>",
    "FIM_REP_ID": "<|repo_name|>",
    "FIM_SEP_ID": "<|file_sep|>",
}


class Qwen2Params(NamedTuple):
    name: str
    file_type: int  # gguf.LlamaFileType
    n_ctx: int
    n_embd: int
    n_layer: int
    n_ff: int
    n_head: int
    n_head_kv: int
    rope_theta: float
    rms_eps: float


@contextmanager
def qwen2_writer(path: Path, hp: Qwen2Params, tokens: Sequence[str], types: Sequence[int],
                 merges: Sequence[str], ids: Mapping[str, int], *,
                 chat_template: str | None = None) -> Iterator[Any]:
    """A GGUFWriter with the header's and the tokenizer's keys added; the tensors added in the
    block are written with them to `path` when it ends. `ids`: the ids of the end token and the
    FIM markers, by their text."""
    import gguf  # test/dev dependency only

    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    w = gguf.GGUFWriter(tmp, "qwen2")
    w.add_name(hp.name)
    w.add_file_type(hp.file_type)
    w.add_context_length(hp.n_ctx)
    w.add_embedding_length(hp.n_embd)
    w.add_block_count(hp.n_layer)
    w.add_feed_forward_length(hp.n_ff)
    w.add_head_count(hp.n_head)
    w.add_head_count_kv(hp.n_head_kv)
    w.add_rope_dimension_count(hp.n_embd // hp.n_head)  # qwen2 requires it == head dim
    w.add_rope_freq_base(hp.rope_theta)
    w.add_layer_norm_rms_eps(hp.rms_eps)
    w.add_tokenizer_model("gpt2")  # byte-level BPE; merges are mandatory
    w.add_tokenizer_pre("qwen2")  # unknown/empty names error or warn
    w.add_token_list(list(tokens))
    w.add_token_types(list(types))
    w.add_token_merges(list(merges))
    # llama.cpp's BPE default bos/eos is id 11: always set them explicitly
    w.add_bos_token_id(ids[EOS])
    w.add_eos_token_id(ids[EOS])
    w.add_pad_token_id(ids[EOS])
    w.add_add_bos_token(False)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    for attr, tok in FIM_MARKERS.items():
        key = getattr(gguf.Keys.Tokenizer, attr, None)
        if key is not None:  # older gguf-py lacks these; llama.cpp then matches by text
            w.add_uint32(key, ids[tok])
    try:
        yield w
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
    except BaseException:
        w.close()
        tmp.unlink(missing_ok=True)
        raise
    w.close()
    os.replace(tmp, path)
