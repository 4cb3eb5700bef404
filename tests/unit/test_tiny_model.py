"""The offline tiny-model generator (local_copilot.devtools.tiny_model)."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

try:
    from local_copilot.devtools import tiny_model as tm
except ImportError:  # running from a checkout without an installed package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    from local_copilot.devtools import tiny_model as tm

gguf = pytest.importorskip("gguf")

FIM = ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]


def _kv(reader, key):
    field = reader.fields[key]
    return field.contents()


def _tensor(reader, name) -> np.ndarray:
    (t,) = [t for t in reader.tensors if t.name == name]
    # GGUFReader returns numpy order already (ggml ne reversed).
    return np.asarray(t.data)


def _read_safetensors(path: Path) -> tuple[dict, bytes]:
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8 : 8 + n]), blob[8 + n :]


@pytest.mark.parametrize("favor", ["x", "\n", "Ċ", " "])
def test_token_id_accepts_plain_and_byte_level(favor):
    expected = {"x": "x", "\n": "Ċ", "Ċ": "Ċ", " ": "Ġ"}[favor]
    assert tm.vocab()[tm.token_id(favor)] == expected


def test_token_id_rejects_multi_token_text():
    with pytest.raises(ValueError):
        tm.token_id("xyz")


def test_gguf_deterministic(tmp_path):
    path = tm.write_gguf(tmp_path / "tiny-x.gguf", favor="x")
    r = gguf.GGUFReader(path)

    assert _kv(r, "general.architecture") == "qwen2"
    assert _kv(r, "general.name") == "tiny-qwen2-fim"
    assert _kv(r, "qwen2.embedding_length") == 128
    assert _kv(r, "qwen2.rope.dimension_count") == 128 // _kv(r, "qwen2.attention.head_count") == 64
    assert _kv(r, "tokenizer.ggml.model") == "gpt2"
    assert _kv(r, "tokenizer.ggml.pre") == "qwen2"
    assert _kv(r, "tokenizer.ggml.add_bos_token") is False
    assert _kv(r, "tokenizer.ggml.merges")  # llama.cpp refuses gpt2 vocab without merges

    tokens = _kv(r, "tokenizer.ggml.tokens")
    types = _kv(r, "tokenizer.ggml.token_type")
    assert set(tm.BYTE_ENCODER.values()) <= set(tokens)  # no byte can be dropped
    assert {"Ġ", "Ċ"} <= set(tokens)
    for special in FIM + ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]:
        assert types[tokens.index(special)] == gguf.TokenType.CONTROL
    assert tokens[_kv(r, "tokenizer.ggml.eos_token_id")] == "<|endoftext|>"
    if hasattr(gguf.Keys.Tokenizer, "FIM_PRE_ID"):
        assert tokens[_kv(r, gguf.Keys.Tokenizer.FIM_PRE_ID)] == "<|fim_prefix|>"
        assert tokens[_kv(r, gguf.Keys.Tokenizer.FIM_SUF_ID)] == "<|fim_suffix|>"
        assert tokens[_kv(r, gguf.Keys.Tokenizer.FIM_MID_ID)] == "<|fim_middle|>"

    n_vocab = len(tokens)
    assert _tensor(r, "token_embd.weight").shape == (n_vocab, 128)
    assert _tensor(r, "blk.1.ffn_down.weight").shape == (128, _kv(r, "qwen2.feed_forward_length"))
    bias = _tensor(r, "output.bias")
    assert bias.shape == (n_vocab,)
    assert tokens[int(np.argmax(bias))] == "x"
    # Projections are zero, so only the favored logit can be non-zero.
    assert not _tensor(r, "blk.0.attn_q.weight").any()


def test_gguf_newline_favor_and_random(tmp_path):
    r = gguf.GGUFReader(tm.write_gguf(tmp_path / "nl.gguf", favor="\n"))
    tokens = _kv(r, "tokenizer.ggml.tokens")
    assert tokens[int(np.argmax(_tensor(r, "output.bias")))] == "Ċ"

    r = gguf.GGUFReader(tm.write_gguf(tmp_path / "rand.gguf", favor=None, seed=1))
    assert _tensor(r, "blk.0.attn_q.weight").any()


def test_gguf_is_deterministic(tmp_path):
    a = tm.write_gguf(tmp_path / "a.gguf").read_bytes()
    b = tm.write_gguf(tmp_path / "b.gguf").read_bytes()
    assert a == b
    # Rewriting in place is fine and yields the same bytes.
    assert tm.write_gguf(tmp_path / "a.gguf").read_bytes() == a
    assert not list(tmp_path.glob("*.tmp"))

    r1 = tm.write_gguf(tmp_path / "r1.gguf", favor=None, seed=7).read_bytes()
    r2 = tm.write_gguf(tmp_path / "r2.gguf", favor=None, seed=7).read_bytes()
    r3 = tm.write_gguf(tmp_path / "r3.gguf", favor=None, seed=8).read_bytes()
    assert r1 == r2 != r3


def test_hf_dir(tmp_path):
    out = tm.write_hf_dir(tmp_path / "hf", favor="x")
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "qwen2"
    assert config["architectures"] == ["Qwen2ForCausalLM"]
    assert config["tie_word_embeddings"] is False
    n_vocab = config["vocab_size"]
    assert n_vocab == len(tm.vocab())
    hidden, heads, kv_heads = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = hidden // heads

    header, data = _read_safetensors(out / "model.safetensors")
    assert header.pop("__metadata__") == {"format": "pt"}
    shapes = {k: tuple(v["shape"]) for k, v in header.items()}
    assert shapes["model.embed_tokens.weight"] == (n_vocab, hidden)
    assert shapes["lm_head.weight"] == (n_vocab, hidden)
    assert shapes["model.norm.weight"] == (hidden,)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        assert shapes[p + "self_attn.q_proj.weight"] == (heads * head_dim, hidden)
        assert shapes[p + "self_attn.k_proj.weight"] == (kv_heads * head_dim, hidden)
        assert shapes[p + "self_attn.v_proj.bias"] == (kv_heads * head_dim,)
        assert shapes[p + "mlp.down_proj.weight"] == (hidden, config["intermediate_size"])
    # Offsets tile the data section exactly, float32 throughout.
    spans = sorted(v["data_offsets"] for v in header.values())
    assert spans[0][0] == 0 and spans[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert {v["dtype"] for v in header.values()} == {"F32"}

    b, e = header["lm_head.weight"]["data_offsets"]
    lm_head = np.frombuffer(data[b:e], "<f4").reshape(n_vocab, hidden)
    assert tm.vocab()[int(np.argmax(lm_head[:, 0]))] == "x"

    tok = json.loads((out / "tokenizer.json").read_text())
    added = {t["content"]: t["id"] for t in tok["added_tokens"]}
    assert set(FIM) <= set(added) and all(t["special"] for t in tok["added_tokens"])
    assert len(tok["model"]["vocab"]) + len(added) == n_vocab
    assert json.loads((out / "tokenizer_config.json").read_text())["eos_token"] == "<|endoftext|>"


def test_hf_dir_is_deterministic(tmp_path):
    def snapshot(d: Path) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(d.iterdir())}

    a = snapshot(tm.write_hf_dir(tmp_path / "a"))
    assert snapshot(tm.write_hf_dir(tmp_path / "b")) == a
    assert snapshot(tm.write_hf_dir(tmp_path / "a")) == a  # idempotent, no leftovers


def test_hf_tokenizer_roundtrip(tmp_path):
    import tokenizers  # a test dependency (pyproject.toml): never skipped
    tok = tokenizers.Tokenizer.from_file(str(tm.write_hf_dir(tmp_path / "hf") / "tokenizer.json"))
    fim_prefix = tm.vocab().index("<|fim_prefix|>")
    assert tok.encode("<|fim_prefix|>").ids == [fim_prefix]
    text = "<|fim_prefix|>def f():\n    ret<|fim_suffix|>\n<|fim_middle|>héllo 😀\t\r\n"
    enc = tok.encode(text)
    assert enc.ids[0] == fim_prefix
    assert tok.decode(enc.ids, skip_special_tokens=False) == text


def test_cli(tmp_path, capsys):
    assert tm.main(["gguf", str(tmp_path / "m.gguf"), "--favor", "\\n"]) == 0
    assert (tmp_path / "m.gguf").read_bytes() == tm.write_gguf(tmp_path / "n.gguf", favor="\n").read_bytes()
    assert tm.main(["hf", str(tmp_path / "hf"), "--random", "--seed", "3"]) == 0
    assert (tmp_path / "hf" / "model.safetensors").exists()
