"""A tiny phrase model whose phrase is spelled in tokens, so the phrase may repeat characters.

The tiny model's phrase variant (tiny_model.phrase_params) is a bigram model: each token has
one successor, so a phrase spells each character once and cannot hold two line ends, two
indentations or two spaces (a multi-line body at an indentation of spaces). This variant
takes the phrase as pieces of text, each a token of its own (a piece the tiny vocabulary
lacks, such as "\\n    " or "print(a, b)", is added to this model's vocabulary): the pieces
must differ from each other, the characters in them need not. Everything else is the tiny
model's: the architecture, the byte symbols, merges, special tokens and FIM markers.

    write_token_phrase_gguf(path, ["a", " = 1", "\\n", "    ", "b", " = 2", "\\n    ", "print(a, b)"])

writes a model that answers every FIM prompt with "a = 1\\n    b = 2\\n    print(a, b)". Tests
only: it is generated per session, like the tiny model.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from . import tiny_model as tm
from .qwen2_gguf import EOS, Qwen2Params, qwen2_writer

__all__ = ["token_vocab", "write_token_phrase_gguf"]


def _byte_level(piece: str) -> str:
    return "".join(tm.BYTE_ENCODER[b] for b in piece.encode("utf-8"))


def token_vocab(pieces: list[str]) -> tuple[list[str], list[int]]:
    """The tiny vocabulary with the pieces it lacks added after it, and each piece's id."""
    toks = tm.vocab()
    ids = []
    for piece in pieces:
        text = _byte_level(piece)
        if text not in toks:
            toks.append(text)
        ids.append(toks.index(text))
    if len(set(ids)) != len(ids):
        raise ValueError("every piece of the phrase must differ from the others")
    return toks, ids


def _weights(n_vocab: int, ids: list[int], toks: list[str], seed: int) -> dict[str, np.ndarray]:
    """tiny_model.phrase_params over this vocabulary: every projection zero, so the hidden
    state is the current token's embedding, and the lm_head row of each piece is the scaled
    embedding of the piece before it (random embeddings in 128 dimensions are nearly
    orthogonal, so that piece is its sure successor)."""
    out = tm.params(None, seed)
    for name, arr in out.items():
        if not name.endswith("norm.weight"):
            arr[...] = 0.0
    rng = np.random.default_rng(seed)
    emb = rng.normal(0.0, 1.0, (n_vocab, tm.N_EMBD)).astype(np.float32)
    head = np.zeros((n_vocab, tm.N_EMBD), np.float32)
    chain = [toks.index("<|fim_middle|>"), *ids]
    for cur, nxt in zip(chain, [*ids, toks.index(EOS)]):
        head[nxt] = 10.0 * emb[cur] / np.linalg.norm(emb[cur])
    out["model.embed_tokens.weight"] = emb
    out["lm_head.weight"] = head
    return out


def write_token_phrase_gguf(path: str | os.PathLike[str], pieces: list[str], seed: int = 0) -> Path:
    """Write the model that writes "".join(pieces) after the FIM middle token, then EOS."""
    import gguf  # test/dev dependency only

    path = Path(path)
    toks, ids = token_vocab(pieces)
    index = {t: i for i, t in enumerate(toks)}
    hp = Qwen2Params(tm.NAME + "-token-phrase", gguf.LlamaFileType.ALL_F32, tm.N_CTX, tm.N_EMBD, tm.N_LAYER,
                     tm.N_FF, tm.N_HEAD, tm.N_HEAD_KV, tm.ROPE_THETA, tm.RMS_EPS)
    types = [gguf.TokenType.CONTROL if t in tm.SPECIALS else gguf.TokenType.NORMAL for t in toks]
    # prompts tokenize as in the tiny model (its merges); the added pieces are output only
    with qwen2_writer(path, hp, toks, types, tm.MERGES, index, chat_template=tm.CHAT_TEMPLATE) as w:
        for name, arr in _weights(len(toks), ids, toks, seed).items():
            w.add_tensor(tm._gguf_name(name), arr)
        w.add_tensor("output.bias", np.zeros(len(toks), np.float32))
    return path
