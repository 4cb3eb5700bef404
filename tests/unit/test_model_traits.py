"""The architecture of a served model, from its GGUF header or its name (health/model_traits.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_copilot.devtools.tiny_mamba import write_mamba_gguf
from local_copilot.devtools.tiny_model import write_gguf
from local_copilot.health.model_traits import NO_CHUNK_REUSE, architecture_by_name, gguf_architecture


def test_the_architecture_is_read_from_the_gguf_header(tmp_path: Path) -> None:
    assert gguf_architecture(write_gguf(tmp_path / "t.gguf")) == "qwen2"
    assert gguf_architecture(write_mamba_gguf(tmp_path / "m.gguf")) == "mamba"
    assert "mamba" in NO_CHUNK_REUSE and "qwen2" not in NO_CHUNK_REUSE


def test_no_file_or_no_gguf_is_none(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"not a model")
    assert gguf_architecture(tmp_path / "x.gguf") is None
    assert gguf_architecture(tmp_path / "absent.gguf") is None


@pytest.mark.parametrize(("name", "arch"), [
    ("Qwen3.5-9B-Q4_K_M.gguf", "qwen35"), ("qwen3.6-27b", "qwen35"), ("Qwen3-Next-80B-A3B-Instruct", "qwen3next"),
    ("unsloth/Qwen3-Coder-Next-GGUF", "qwen3next"), ("granite-4.0-h-tiny", "granitehybrid"), ("LFM2-1.2B", "lfm2"),
    ("NVIDIA-Nemotron-Nano-9B-v2", "nemotron_h"), ("rwkv7-g1-2.9b", "rwkv7"), ("mamba-codestral-7B", "mamba"),
    ("Falcon-H1-1.5B", "falcon-h1"),
    ("qwen2.5-coder-1.5b-q8_0.gguf", None), ("Qwen3-Coder-30B-A3B", None), ("qwen3-8b", None),
    ("granite-3.3-8b", None), ("gemma-3-270m", None),
])
def test_names_that_say_a_hybrid_or_recurrent_architecture(name: str, arch: str | None) -> None:
    assert architecture_by_name(name) == arch
    if arch is not None:
        assert arch in NO_CHUNK_REUSE
