"""Generate tiny offline Qwen2-style FIM models for tests (no downloads needed).

Two outputs share one set of weights and one byte-level BPE vocabulary:

* ``gguf``: a single GGUF file that llama-server loads (arch ``qwen2``).
* ``hf``:   a transformers/vLLM checkpoint directory (``Qwen2ForCausalLM``).

By default the model is *deterministic*: greedy decoding always emits the
``favor`` token (``"x"`` → completions read ``"xxxx…"``), which makes
end-to-end tests exact.  With ``--random`` the weights are small random
numbers (seeded), useful for "the server answers at all" checks.

    python -m local_copilot.devtools.tiny_model gguf OUT.gguf [--favor x] [--random] [--seed N]
    python -m local_copilot.devtools.tiny_model hf OUTDIR [--favor x] [--random] [--seed N]

Output is byte-for-byte reproducible for the same arguments and is written
atomically (temp file + rename), so re-running is safe.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np

from .qwen2_gguf import EOS, Qwen2Params, qwen2_writer

NAME = "tiny-qwen2-fim"

# Model shape: as small as llama.cpp/vLLM accept while still exercising GQA.
N_EMBD = 128
N_FF = 256
N_LAYER = 2
N_HEAD = 2
N_HEAD_KV = 2
# 64: vLLM's CPU attention has kernels for common head sizes only (16 fails at the first request)
HEAD_DIM = N_EMBD // N_HEAD
N_CTX = 4096
RMS_EPS = 1e-6
ROPE_THETA = 1_000_000.0

# Qwen2.5-Coder's special tokens, in its order.  All are "control" tokens, so
# llama.cpp treats them as specials (FIM markers, end-of-generation).
SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
]

# ChatML, as Qwen2.5's instruct models write it: llama-server's and vLLM's chat endpoints
# render messages with it (instruction edits ask those endpoints)
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# A few merges so the BPE path is really exercised (indentation, "def", "ret").
# Every merge result becomes a vocab entry right after the 256 byte symbols.
MERGES = ["Ġ Ġ", "ĠĠ ĠĠ", "d e", "de f", "r e", "re t"]

# Qwen2's pre-tokenizer regex (same as llama.cpp's tokenizer.ggml.pre="qwen2").
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte → printable-char map (byte-level BPE alphabet)."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_ENCODER = bytes_to_unicode()


def vocab() -> list[str]:
    """Token texts by id: 256 byte symbols (by byte value), merges, specials.

    All 256 byte symbols are present so no input byte is ever dropped.
    """
    toks = [BYTE_ENCODER[b] for b in range(256)]
    toks += [m.replace(" ", "") for m in MERGES]
    toks += SPECIALS
    assert len(set(toks)) == len(toks)
    return toks


def token_id(text: str) -> int:
    """Id of a token given either in byte-level form ("Ċ") or plain ("\\n")."""
    toks = vocab()
    if text in toks:
        return toks.index(text)
    encoded = "".join(BYTE_ENCODER[b] for b in text.encode("utf-8"))
    if encoded in toks:
        return toks.index(encoded)
    raise ValueError(f"favor token {text!r} is not a single token of the tiny vocab")


def phrase_params(phrase: str, seed: int, alt: str | None = None, alt_gap: float = 0.3) -> dict[str, np.ndarray]:
    """A deterministic "bigram" model that writes `phrase` after the FIM middle token, then EOS.

    With every projection zero, the hidden state is the current token's embedding; random
    embeddings in 128 dimensions are nearly orthogonal, so an lm_head row equal to the
    (scaled) embedding of token t makes its own token the sure successor of t. Each byte of
    `phrase` must occur once, so every token has a single successor.
    """
    ids = [token_id(ch) for ch in phrase]
    alt_ids = [token_id(ch) for ch in alt or ""]
    if len(set(ids + alt_ids)) != len(ids) + len(alt_ids):
        raise ValueError("every character of the phrase (and alt) must be distinct")
    out = params(None, seed)
    rng = np.random.default_rng(seed)
    for name, arr in out.items():
        if not name.endswith("norm.weight"):
            arr[...] = 0.0
    emb = rng.normal(0.0, 1.0, out["model.embed_tokens.weight"].shape).astype(np.float32)
    out["model.embed_tokens.weight"] = emb
    head = out["lm_head.weight"]
    chain = [token_id("<|fim_middle|>"), *ids]
    successors = [*ids, token_id(EOS)]
    for cur, nxt in zip(chain, successors):
        head[nxt] = 10.0 * emb[cur] / np.linalg.norm(emb[cur])
    if alt_ids:
        # a second way to start, `alt_gap` logits behind the first: greedy at a low
        # temperature, but sampling at a high one sometimes takes it (alternatives)
        start = emb[chain[0]] / np.linalg.norm(emb[chain[0]])
        head[alt_ids[0]] = (10.0 - alt_gap / np.sqrt(N_EMBD)) * start
        # ends with another end-of-generation token: one row of lm_head can follow one token only
        for cur, nxt in zip(alt_ids, [*alt_ids[1:], token_id("<|im_end|>")]):
            head[nxt] = 10.0 * emb[cur] / np.linalg.norm(emb[cur])
    return out


def params(favor: str | None, seed: int) -> dict[str, np.ndarray]:
    """Weights in HF naming / torch layout ([out, in]).

    The numpy shapes equal GGUF's (ggml ``ne`` is the reverse of the numpy
    shape), and qwen2 uses NEOX rope in both runtimes, so the GGUF file gets
    the very same arrays without any permutation.

    Deterministic variant (favor given): every projection is zero, so each
    residual stream just carries its token embedding; column 0 of every
    embedding is 1.0, so after the final RMS norm hidden[0] is large and
    positive, and lm_head row ``favor`` reads only that column → favor's
    logit is ~80 while every other logit is 0.
    """
    rng = np.random.default_rng(seed)
    n_vocab = len(vocab())
    q_out, kv_out = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (n_vocab, N_EMBD)}
    for i in range(N_LAYER):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (N_EMBD,),
            p + "self_attn.q_proj.weight": (q_out, N_EMBD),
            p + "self_attn.q_proj.bias": (q_out,),
            p + "self_attn.k_proj.weight": (kv_out, N_EMBD),
            p + "self_attn.k_proj.bias": (kv_out,),
            p + "self_attn.v_proj.weight": (kv_out, N_EMBD),
            p + "self_attn.v_proj.bias": (kv_out,),
            p + "self_attn.o_proj.weight": (N_EMBD, q_out),
            p + "post_attention_layernorm.weight": (N_EMBD,),
            p + "mlp.gate_proj.weight": (N_FF, N_EMBD),
            p + "mlp.up_proj.weight": (N_FF, N_EMBD),
            p + "mlp.down_proj.weight": (N_EMBD, N_FF),
        }
    shapes |= {"model.norm.weight": (N_EMBD,), "lm_head.weight": (n_vocab, N_EMBD)}

    out: dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            arr = np.ones(shape, np.float32)
        elif favor is None:
            arr = rng.normal(0.0, 0.02, shape).astype(np.float32)
        elif name == "model.embed_tokens.weight":
            # Noise keeps tokens distinguishable; column 0 drives the logit.
            arr = rng.normal(0.0, 0.01, shape).astype(np.float32)
            arr[:, 0] = 1.0
        else:
            arr = np.zeros(shape, np.float32)
        out[name] = arr
    if favor is not None:
        out["lm_head.weight"][token_id(favor), 0] = 10.0
    return out


# ---------------------------------------------------------------- GGUF


def _gguf_name(hf: str) -> str:
    fixed = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    if hf in fixed:
        return fixed[hf]
    _, _, i, rest = hf.split(".", 3)
    for a, b in [
        ("input_layernorm", "attn_norm"),
        ("post_attention_layernorm", "ffn_norm"),
        ("self_attn.q_proj", "attn_q"),
        ("self_attn.k_proj", "attn_k"),
        ("self_attn.v_proj", "attn_v"),
        ("self_attn.o_proj", "attn_output"),
        ("mlp.gate_proj", "ffn_gate"),
        ("mlp.up_proj", "ffn_up"),
        ("mlp.down_proj", "ffn_down"),
    ]:
        if rest.startswith(a + "."):
            return f"blk.{i}.{b}{rest[len(a):]}"
    raise KeyError(hf)


def _readable_bias(toks: list[str]) -> np.ndarray:
    """-30 on tokens that would not read as text: specials (end generation at once), bytes
    outside printable ASCII (random UTF-8 fragments render as replacement marks) and the
    newline (random lines never keep the indentation, so the server's n_indent stops them)."""
    bias = np.zeros(len(toks), np.float32)
    byte_of = {ch: b for b, ch in BYTE_ENCODER.items()}
    for i, tok in enumerate(toks):
        if tok in SPECIALS or len(tok) == 1 and tok in byte_of and not 32 <= byte_of[tok] < 127:
            bias[i] = -30.0
    return bias


def write_gguf(path: str | os.PathLike[str], favor: str | None = "x", seed: int = 0,
               readable: bool = False, phrase: str | None = None, alt: str | None = None) -> Path:
    """Write the tiny model as GGUF; ``favor=None`` means random weights.

    ``readable`` (random weights only) keeps the noise printable: the demo shows it on screen.
    """
    import gguf  # test/dev dependency only

    path = Path(path)
    toks = vocab()
    ids = {t: i for i, t in enumerate(toks)}
    hp = Qwen2Params(NAME if favor is not None or phrase else NAME + "-random", gguf.LlamaFileType.ALL_F32,
                     N_CTX, N_EMBD, N_LAYER, N_FF, N_HEAD, N_HEAD_KV, ROPE_THETA, RMS_EPS)
    types = [gguf.TokenType.CONTROL if t in SPECIALS else gguf.TokenType.NORMAL for t in toks]
    with qwen2_writer(path, hp, toks, types, MERGES, ids, chat_template=CHAT_TEMPLATE) as w:
        weights = phrase_params(phrase, seed, alt) if phrase else params(favor, seed)
        for name, arr in weights.items():
            w.add_tensor(_gguf_name(name), arr)
        # output.bias is optional for qwen2; a one-hot bias on the favor token makes
        # the deterministic choice independent of hidden-state numerics.
        bias = _readable_bias(toks) if readable and favor is None else np.zeros(len(toks), np.float32)
        if favor is not None and not phrase:
            bias[token_id(favor)] = 10.0
        w.add_tensor("output.bias", bias)
    return path


# ---------------------------------------------------------------- HF dir


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _json(obj: object) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def safetensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    """Serialize float32 tensors in the safetensors format (no dependency).

    Layout: u64-LE header length, JSON header, raw little-endian data.
    """
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(tensors[name].shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    h += b" " * (-len(h) % 8)  # keep data 8-byte aligned, as the reference writer does
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def tokenizer_json() -> dict[str, object]:
    """HF `tokenizers` byte-level BPE equivalent of the GGUF vocab."""
    toks = vocab()
    n_bpe = len(toks) - len(SPECIALS)
    byte_level = {"add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, t in enumerate(toks)
            if i >= n_bpe
        ],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": QWEN2_SPLIT},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {"type": "ByteLevel", **byte_level},
            ],
        },
        "post_processor": {"type": "ByteLevel", **byte_level},
        "decoder": {"type": "ByteLevel", **byte_level},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(toks[:n_bpe])},
            "merges": MERGES,
        },
    }


def write_hf_dir(path: str | os.PathLike[str], favor: str | None = "x", seed: int = 0,
                 phrase: str | None = None) -> Path:
    """Write the tiny model as an HF/vLLM checkpoint dir; ``favor=None`` = random."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    toks = vocab()
    eos = toks.index(EOS)
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": len(toks),
        "hidden_size": N_EMBD,
        "intermediate_size": N_FF,
        "num_hidden_layers": N_LAYER,
        "num_attention_heads": N_HEAD,
        "num_key_value_heads": N_HEAD_KV,
        "hidden_act": "silu",
        "max_position_embeddings": N_CTX,
        "max_window_layers": N_LAYER,
        "use_sliding_window": False,
        "sliding_window": None,
        "rms_norm_eps": RMS_EPS,
        "rope_theta": ROPE_THETA,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "tie_word_embeddings": False,  # lm_head differs from embed_tokens
        "use_cache": True,
        "torch_dtype": "float32",  # transformers < 5
        "dtype": "float32",  # transformers >= 5
        "bos_token_id": eos,
        "eos_token_id": eos,
    }
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",  # loads tokenizer.json as is
        "bos_token": None,
        "eos_token": EOS,
        "pad_token": EOS,
        "unk_token": None,
        "additional_special_tokens": SPECIALS[1:],
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "model_max_length": N_CTX,
        "chat_template": CHAT_TEMPLATE,
    }
    files = {
        "config.json": _json(config),
        "generation_config.json": _json({"bos_token_id": eos, "eos_token_id": eos}),
        "tokenizer.json": _json(tokenizer_json()),
        "tokenizer_config.json": _json(tok_config),
        "model.safetensors": safetensors_bytes(phrase_params(phrase, seed) if phrase else params(favor, seed)),
    }
    for name, data in files.items():
        _atomic_write(path / name, data)
    return path


# ---------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m local_copilot.devtools.tiny_model",
        description="Write a tiny offline Qwen2 FIM test model.",
    )
    ap.add_argument("format", choices=["gguf", "hf"], help="GGUF file or HF checkpoint dir")
    ap.add_argument("out", help="output .gguf file (gguf) or directory (hf)")
    ap.add_argument(
        "--favor",
        default="x",
        help='token greedy decoding always emits: "x", "\\n", " " or byte-level "Ċ"/"Ġ" (default x)',
    )
    ap.add_argument("--random", action="store_true", help="random weights instead of --favor")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    # Shells can't easily pass a literal newline; accept the escapes too.
    favor = None if a.random else {"\\n": "\n", "\\t": "\t"}.get(a.favor, a.favor)
    writer = write_gguf if a.format == "gguf" else write_hf_dir
    print(writer(a.out, favor=favor, seed=a.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
