"""Random-weight GGUF models with a real code model's compute shape, for the realistic bench.

The tiny test models answer in milliseconds, so a bench against them sees only the plugin's
own overhead. What a user waits for on a real model is the server's prompt evaluation; a model
with Qwen2.5-Coder's exact shape (layers, width, heads, KV heads, FFN, the 151,936-row
vocabulary, Q8_0) costs the same per token whatever its weights are. No weights are
downloaded: the vocabulary is a byte-level BPE trained here with `tokenizers` on Python
sources (Qwen2's pre-tokenizer split, Qwen's special tokens at Qwen's ids), padded with unused
rows to Qwen's vocabulary size so each generated token costs a real model's output matrix.

Random weights give nearly flat logits, and llama.cpp's `infill` sampler ends such answers at
their first token; the output norm is scaled so the top token stands out about as much as a
code model's does.

    python -m local_copilot.devtools.real_shape_model [--shape qwen2.5-coder-0.5b|qwen2.5-coder-1.5b] [--out F]

Generation is idempotent: the file is written once (atomically) under the cache directory
(`$LOCAL_COPILOT_MODEL_CACHE`, default ~/.cache/local-copilot/models) and reused.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .qwen2_gguf import Qwen2Params, qwen2_writer
from .tiny_model import QWEN2_SPLIT, SPECIALS

__all__ = ["Shape", "SHAPES", "QWEN_SPECIAL_IDS", "cache_dir", "model_path", "train_vocab", "write_real_gguf",
           "ensure_model", "write_real_hf_dir", "ensure_hf_model"]


@dataclass(frozen=True)
class Shape:
    name: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int = 151_936
    n_ctx: int = 32_768
    rope_theta: float = 1_000_000.0


# From the models' config.json (Qwen/Qwen2.5-Coder-0.5B and -1.5B): both tie the output
# matrix to the token embeddings.
SHAPES: dict[str, Shape] = {
    "qwen2.5-coder-0.5b": Shape("qwen2.5-coder-0.5b", n_layer=24, n_embd=896, n_head=14, n_head_kv=2, n_ff=4864),
    "qwen2.5-coder-1.5b": Shape("qwen2.5-coder-1.5b", n_layer=28, n_embd=1536, n_head=12, n_head_kv=2, n_ff=8960),
}

# Qwen2.5's ids of its special tokens (tokenizer_config.json "added_tokens_decoder")
QWEN_SPECIAL_IDS = {
    "<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
    "<|fim_prefix|>": 151659, "<|fim_middle|>": 151660, "<|fim_suffix|>": 151661,
    "<|fim_pad|>": 151662, "<|repo_name|>": 151663, "<|file_sep|>": 151664,
}
assert set(QWEN_SPECIAL_IDS) == set(SPECIALS)

VOCAB_SIZE = 32_000  # trained BPE tokens (bytes and merges); the rest of the rows are unused
WEIGHT_STD = 0.02  # Qwen2's initializer_range
# logits' spread over the vocabulary: the top token of a random hidden state is then a few
# logits ahead of the next, as sure as a code model mostly is (see the module doc)
LOGIT_STD = 8.0
Q8_BLOCK = 32


def cache_dir() -> Path:
    root = os.environ.get("LOCAL_COPILOT_MODEL_CACHE")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "local-copilot" / "models"


def model_path(shape: str, seed: int = 0) -> Path:
    return cache_dir() / f"{shape}-shape-random-q8_0-s{seed}.gguf"


def python_sources(limit_bytes: int = 24_000_000) -> list[str]:
    """Python files of this interpreter's standard library, up to `limit_bytes` in all."""
    stdlib = sysconfig.get_paths()["stdlib"]
    files, total = [], 0
    for f in sorted(glob.glob(os.path.join(stdlib, "**", "*.py"), recursive=True)):
        if "site-packages" in f:
            continue
        try:
            size = os.path.getsize(f)
        except OSError:
            continue
        files.append(f)
        total += size
        if total >= limit_bytes:
            break
    return files


def train_vocab(files: list[str], vocab_size: int = VOCAB_SIZE) -> tuple[list[str], list[str]]:
    """A byte-level BPE trained on `files` with Qwen2's pre-tokenizer split: (tokens in
    byte-level form by id, merges as "a b"). All 256 byte symbols are in it."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    def texts() -> Iterator[str]:
        for f in files:
            with open(f, encoding="utf-8", errors="replace") as fh:
                yield fh.read()

    tok.train_from_iterator(texts(), trainer, length=len(files))
    import json

    model = json.loads(tok.to_str())["model"]
    by_id = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in by_id]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, merges


def full_vocab(bpe: list[str], n_vocab: int) -> tuple[list[str], list[int]]:
    """Token texts and types for all `n_vocab` rows: the BPE tokens, unused padding rows, and
    Qwen's specials at Qwen's ids."""
    import gguf

    if len(bpe) > min(QWEN_SPECIAL_IDS.values()):
        raise ValueError("the trained vocabulary overlaps Qwen's special ids")
    toks = list(bpe) + [f"<|unused_{i}|>" for i in range(len(bpe), n_vocab)]
    types = [int(gguf.TokenType.NORMAL)] * len(bpe) + [int(gguf.TokenType.UNUSED)] * (n_vocab - len(bpe))
    for text, i in QWEN_SPECIAL_IDS.items():
        toks[i], types[i] = text, int(gguf.TokenType.CONTROL)
    return toks, types


def random_q8_0(rng: np.random.Generator, rows: int, cols: int, std: float) -> np.ndarray:
    """A random [rows, cols] matrix as Q8_0 blocks (a f16 scale and 32 int8 each), drawn
    directly in int8 (no float matrix): uniform int8 in [-127, 127] has std ~73.6."""
    if cols % Q8_BLOCK:
        raise ValueError(f"{cols} columns do not split into Q8_0 blocks")
    n_blocks = rows * cols // Q8_BLOCK
    out = np.empty((n_blocks, 2 + Q8_BLOCK), np.uint8)
    out[:, :2] = np.frombuffer(np.float16(std / 73.6).tobytes(), np.uint8)
    out[:, 2:] = rng.integers(-127, 128, (n_blocks, Q8_BLOCK), dtype=np.int8).view(np.uint8)
    return out.reshape(rows, cols // Q8_BLOCK * (2 + Q8_BLOCK))


def write_real_gguf(path: Path, shape: Shape, bpe: list[str], merges: list[str], seed: int = 0) -> Path:
    """Write the model (random Q8_0 weights, f32 norms and biases) atomically to `path`."""
    import gguf

    q8 = gguf.GGMLQuantizationType.Q8_0
    rng = np.random.default_rng(seed)
    toks, types = full_vocab(bpe, shape.n_vocab)
    head_dim = shape.n_embd // shape.n_head
    path.parent.mkdir(parents=True, exist_ok=True)
    hp = Qwen2Params(f"{shape.name}-shape-random", gguf.LlamaFileType.MOSTLY_Q8_0, shape.n_ctx, shape.n_embd,
                     shape.n_layer, shape.n_ff, shape.n_head, shape.n_head_kv, shape.rope_theta, 1e-6)
    with qwen2_writer(path, hp, toks, types, merges, QWEN_SPECIAL_IDS) as w:
        def q8_tensor(name: str, rows: int, cols: int) -> None:
            w.add_tensor(name, random_q8_0(rng, rows, cols, WEIGHT_STD), raw_dtype=q8)

        # tied: the output matrix is token_embd. Unused rows are zero (their logit 0 never beats
        # a real token's); specials get the real tokens' spread, so answers end now and then.
        emb = random_q8_0(rng, shape.n_vocab, shape.n_embd, WEIGHT_STD)
        unused = np.array([t == int(gguf.TokenType.UNUSED) for t in types])
        emb[unused] = 0
        w.add_tensor("token_embd.weight", emb, raw_dtype=q8)
        # logit = rmsnorm(h) * norm_weight . embedding row: std = norm_weight * WEIGHT_STD * sqrt(n_embd)
        out_norm = LOGIT_STD / (WEIGHT_STD * np.sqrt(shape.n_embd))
        w.add_tensor("output_norm.weight", np.full(shape.n_embd, out_norm, np.float32))
        q_out, kv_out = shape.n_head * head_dim, shape.n_head_kv * head_dim
        for i in range(shape.n_layer):
            p = f"blk.{i}."
            w.add_tensor(p + "attn_norm.weight", np.ones(shape.n_embd, np.float32))
            w.add_tensor(p + "ffn_norm.weight", np.ones(shape.n_embd, np.float32))
            q8_tensor(p + "attn_q.weight", q_out, shape.n_embd)
            q8_tensor(p + "attn_k.weight", kv_out, shape.n_embd)
            q8_tensor(p + "attn_v.weight", kv_out, shape.n_embd)
            for b, n in (("attn_q.bias", q_out), ("attn_k.bias", kv_out), ("attn_v.bias", kv_out)):
                w.add_tensor(p + b, rng.normal(0.0, WEIGHT_STD, n).astype(np.float32))
            q8_tensor(p + "attn_output.weight", shape.n_embd, q_out)
            q8_tensor(p + "ffn_gate.weight", shape.n_ff, shape.n_embd)
            q8_tensor(p + "ffn_up.weight", shape.n_ff, shape.n_embd)
            q8_tensor(p + "ffn_down.weight", shape.n_embd, shape.n_ff)
    return path


def ensure_model(shape: str = "qwen2.5-coder-0.5b", seed: int = 0, out: Path | None = None,
                 log: bool = True) -> Path:
    """The cached model, generated first when it is missing (~1-2 min for 0.5B)."""
    path = out or model_path(shape, seed)
    if path.exists():
        return path
    if log:
        print(f"generating {path} (BPE on the standard library, random Q8_0 weights) ...", file=sys.stderr, flush=True)
    bpe, merges = train_vocab(python_sources())
    return write_real_gguf(path, SHAPES[shape], bpe, merges, seed)


def hf_dir_path(shape: str, seed: int = 0) -> Path:
    return cache_dir() / f"{shape}-shape-random-bf16-s{seed}"


def _bf16(a: np.ndarray) -> bytes:
    """float32 -> bfloat16 bytes (the upper half of each float, rounded to nearest even)."""
    bits = np.ascontiguousarray(a, dtype="<f4").view("<u4")
    bits = bits + 0x7FFF + ((bits >> 16) & 1)
    out: bytes = (bits >> 16).astype("<u2").tobytes()
    return out


def _hf_tensors(shape: Shape, rng: np.random.Generator, unused: np.ndarray) -> Iterator[tuple[str, tuple[int, ...], Any]]:
    """(name, shape, make) in Qwen2's HF naming; make() draws the float32 values when written."""
    head_dim = shape.n_embd // shape.n_head
    q_out, kv_out = shape.n_head * head_dim, shape.n_head_kv * head_dim
    out_norm = LOGIT_STD / (WEIGHT_STD * np.sqrt(shape.n_embd))

    def normal(*dims: int) -> Any:
        return lambda: rng.normal(0.0, WEIGHT_STD, dims).astype(np.float32)

    def embedding() -> np.ndarray:
        e = rng.normal(0.0, WEIGHT_STD, (shape.n_vocab, shape.n_embd)).astype(np.float32)
        e[unused] = 0  # as in the GGUF: an unused row's logit 0 never beats a real token's
        return e

    yield "model.embed_tokens.weight", (shape.n_vocab, shape.n_embd), embedding
    yield "model.norm.weight", (shape.n_embd,), lambda: np.full(shape.n_embd, out_norm, np.float32)
    for i in range(shape.n_layer):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", (shape.n_embd,), lambda: np.ones(shape.n_embd, np.float32)
        yield p + "post_attention_layernorm.weight", (shape.n_embd,), lambda: np.ones(shape.n_embd, np.float32)
        yield p + "self_attn.q_proj.weight", (q_out, shape.n_embd), normal(q_out, shape.n_embd)
        yield p + "self_attn.q_proj.bias", (q_out,), normal(q_out)
        yield p + "self_attn.k_proj.weight", (kv_out, shape.n_embd), normal(kv_out, shape.n_embd)
        yield p + "self_attn.k_proj.bias", (kv_out,), normal(kv_out)
        yield p + "self_attn.v_proj.weight", (kv_out, shape.n_embd), normal(kv_out, shape.n_embd)
        yield p + "self_attn.v_proj.bias", (kv_out,), normal(kv_out)
        yield p + "self_attn.o_proj.weight", (shape.n_embd, q_out), normal(shape.n_embd, q_out)
        yield p + "mlp.gate_proj.weight", (shape.n_ff, shape.n_embd), normal(shape.n_ff, shape.n_embd)
        yield p + "mlp.up_proj.weight", (shape.n_ff, shape.n_embd), normal(shape.n_ff, shape.n_embd)
        yield p + "mlp.down_proj.weight", (shape.n_embd, shape.n_ff), normal(shape.n_embd, shape.n_ff)


def write_real_hf_dir(path: Path, shape: Shape, bpe: list[str], merges: list[str], seed: int = 0) -> Path:
    """The same shape as an HF checkpoint directory for vLLM (random bf16 weights, the same
    trained vocabulary with Qwen's specials at Qwen's ids, tied embeddings), written atomically."""
    import json
    import struct

    import gguf

    toks, types = full_vocab(bpe, shape.n_vocab)
    unused = np.array([t == int(gguf.TokenType.UNUSED) for t in types])
    rng = np.random.default_rng(seed)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    eos = QWEN_SPECIAL_IDS["<|endoftext|>"]
    config = {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": shape.n_vocab,
        "hidden_size": shape.n_embd, "intermediate_size": shape.n_ff, "num_hidden_layers": shape.n_layer,
        "num_attention_heads": shape.n_head, "num_key_value_heads": shape.n_head_kv, "hidden_act": "silu",
        "max_position_embeddings": shape.n_ctx, "max_window_layers": shape.n_layer, "use_sliding_window": False,
        "sliding_window": None, "rms_norm_eps": 1e-6, "rope_theta": shape.rope_theta, "attention_dropout": 0.0,
        "initializer_range": WEIGHT_STD, "tie_word_embeddings": True, "use_cache": True,
        "torch_dtype": "bfloat16", "dtype": "bfloat16", "bos_token_id": eos, "eos_token_id": eos,
    }
    byte_level = {"add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for t, i in sorted(QWEN_SPECIAL_IDS.items(),
                                                                                    key=lambda kv: kv[1])],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", **byte_level}]},
        "post_processor": {"type": "ByteLevel", **byte_level},
        "decoder": {"type": "ByteLevel", **byte_level},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(bpe)}, "merges": merges},
    }
    tok_config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|endoftext|>",
                  "pad_token": "<|endoftext|>", "unk_token": None, "add_bos_token": False,
                  "clean_up_tokenization_spaces": False, "model_max_length": shape.n_ctx}
    for name, obj in (("config.json", config), ("generation_config.json", {"bos_token_id": eos, "eos_token_id": eos}),
                      ("tokenizer.json", tokenizer), ("tokenizer_config.json", tok_config)):
        (tmp / name).write_text(json.dumps(obj, ensure_ascii=False))
    tensors = list(_hf_tensors(shape, rng, unused))
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dims, _ in tensors:
        size = 2 * int(np.prod(dims))
        header[name] = {"dtype": "BF16", "shape": list(dims), "data_offsets": [offset, offset + size]}
        offset += size
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(tmp / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, _, make in tensors:  # one tensor in memory at a time
            f.write(_bf16(make()))
    if path.exists():
        import shutil

        shutil.rmtree(path)
    os.replace(tmp, path)
    return path


def ensure_hf_model(shape: str = "qwen2.5-coder-0.5b", seed: int = 0, log: bool = True) -> Path:
    """The cached HF directory for vLLM, generated first when it is missing."""
    path = hf_dir_path(shape, seed)
    if (path / "model.safetensors").exists():
        return path
    if log:
        print(f"generating {path} (BPE on the standard library, random bf16 weights) ...", file=sys.stderr, flush=True)
    bpe, merges = train_vocab(python_sources())
    return write_real_hf_dir(path, SHAPES[shape], bpe, merges, seed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m local_copilot.devtools.real_shape_model",
                                 description="Write (once) a random-weight GGUF with a real code model's shape.")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-coder-0.5b")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help=f"default: {cache_dir()}/<shape>-...gguf")
    a = ap.parse_args(argv)
    print(ensure_model(a.shape, a.seed, a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
