"""The realistic bench's model generator (local_copilot.devtools.real_shape_model), on a small
variant: the real shapes take minutes and ~530 MB, a bench's job, not a test's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from local_copilot.devtools import real_shape_model as rs
from local_copilot.servers.llama_cpp import LlamaServer

from ..launch import suite_options

gguf = pytest.importorskip("gguf")
pytest.importorskip("tokenizers")

SMALL = rs.Shape("small", n_layer=2, n_embd=64, n_head=2, n_head_kv=1, n_ff=128, n_ctx=2048)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = rs.python_sources(limit_bytes=300_000)
    bpe, merges = rs.train_vocab(files, vocab_size=600)
    return rs.write_real_gguf(tmp_path_factory.mktemp("real") / "small.gguf", SMALL, bpe, merges, seed=3)


def test_the_real_shapes_are_qwen_coders() -> None:
    half = rs.SHAPES["qwen2.5-coder-0.5b"]
    assert (half.n_layer, half.n_embd, half.n_head, half.n_head_kv, half.n_ff, half.n_vocab) == (24, 896, 14, 2, 4864, 151_936)
    big = rs.SHAPES["qwen2.5-coder-1.5b"]
    assert (big.n_layer, big.n_embd, big.n_head, big.n_head_kv, big.n_ff, big.n_vocab) == (28, 1536, 12, 2, 8960, 151_936)


def test_random_q8_0_blocks_have_the_asked_spread() -> None:
    raw = rs.random_q8_0(np.random.default_rng(0), 64, 128, 0.02)
    values = gguf.dequantize(raw, gguf.GGMLQuantizationType.Q8_0)
    assert values.shape == (64, 128)
    assert abs(float(values.std()) - 0.02) < 0.002


def test_the_file_has_the_shape_a_padded_vocabulary_and_qwens_specials(small_model: Path) -> None:
    reader = gguf.GGUFReader(small_model)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    assert len(tokens) == 151_936  # each generated token costs a real output matrix
    for text, i in rs.QWEN_SPECIAL_IDS.items():
        assert tokens[i] == text and types[i] == gguf.TokenType.CONTROL
    assert reader.fields["tokenizer.ggml.pre"].contents() == "qwen2"
    assert reader.fields["tokenizer.ggml.fim_pre_token_id"].contents() == rs.QWEN_SPECIAL_IDS["<|fim_prefix|>"]
    trained = [t for t, k in zip(tokens, types) if k == gguf.TokenType.NORMAL]
    assert 256 < len(trained) <= 600 and "Ġ" in trained and "Ċ" in trained  # all bytes, then merges
    by_name = {t.name: t for t in reader.tensors}
    assert by_name["blk.1.ffn_up.weight"].tensor_type == gguf.GGMLQuantizationType.Q8_0
    assert list(by_name["token_embd.weight"].shape) == [64, 151_936]
    assert "output.weight" not in by_name  # tied, as Qwen2.5-Coder 0.5B and 1.5B are


def test_the_generation_is_idempotent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_COPILOT_MODEL_CACHE", str(tmp_path))
    path = rs.model_path("qwen2.5-coder-0.5b")
    path.write_bytes(b"kept")
    assert rs.ensure_model("qwen2.5-coder-0.5b", log=False) == path and path.read_bytes() == b"kept"


def test_llama_server_answers_with_more_than_one_token_through_the_infill_sampler(
        small_model: Path, llama_bin: str, tmp_path: Path) -> None:
    """Flat logits would make the infill sampler end every answer at its first token."""
    import httpx

    # -c after the recipe's: the small shape's trained context, below the recipe's smallest slot;
    # --no-repack: as the real models run (devtools/real_models.NO_REPACK)
    options = suite_options("-c", "2048", "--no-repack")
    with LlamaServer.for_model(small_model, binary=llama_bin, log_file=tmp_path / "server.log", options=options) as server:
        body = {"prompt": "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n<|fim_middle|>", "n_predict": 8,
                "samplers": ["top_k", "top_p", "infill"], "top_k": 40, "top_p": 0.9, "cache_prompt": False}
        answer = httpx.post(server.url + "/completion", json=body, timeout=60, trust_env=False).json()
    assert answer["timings"]["predicted_n"] >= 4, answer
