"""vLLM memory sizing against recorded nvidia-smi readings of 8, 24 and 80 GB cards."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_copilot.servers.memory import (
    GiB,
    MiB,
    model_shape,
    parse_nvidia_smi,
    pick_gpu,
    plan_vllm_memory,
    weights_bytes,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nvidia_smi"

# published config.json values of Qwen2.5-Coder; weights = parameters x 2 bytes (bf16 safetensors)
QWEN_1_5B = {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
             "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
             "torch_dtype": "bfloat16"}
QWEN_1_5B_WEIGHTS = 3_087_467_144
QWEN_7B = {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
           "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 32768, "dtype": "bfloat16"}
QWEN_7B_WEIGHTS = 15_231_233_024

DEFAULTS = {"max_model_len": 8192, "max_num_seqs": 8, "max_num_batched_tokens": 4096}


def gpu(name: str, index: int = 0):  # noqa: ANN201
    return parse_nvidia_smi((FIXTURES / name).read_text())[index]


def test_parse_nvidia_smi_reads_each_gpu_in_mib() -> None:
    gpus = parse_nvidia_smi((FIXTURES / "2x-rtx4090.txt").read_text())
    assert [(g.index, g.total_mib, g.used_mib, g.free_mib) for g in gpus] == [(0, 24564, 507, 23663),
                                                                              (1, 24564, 459, 23711)]
    assert gpus[0].total == 24564 * MiB


def test_parse_skips_lines_that_are_not_readings() -> None:
    assert parse_nvidia_smi("[N/A], [N/A], [N/A]\nNVIDIA-SMI has failed\n") == []


def test_cuda_visible_devices_picks_the_gpu_vllm_will_use() -> None:
    gpus = parse_nvidia_smi((FIXTURES / "2x-rtx4090.txt").read_text())
    assert pick_gpu(gpus, {}) == gpus[0]
    assert pick_gpu(gpus, {"CUDA_VISIBLE_DEVICES": "1,0"}) == gpus[1]
    assert pick_gpu(gpus, {"CUDA_VISIBLE_DEVICES": ""}) is None
    assert pick_gpu(None, {}) is None


def test_kv_bytes_per_token_from_config() -> None:
    shape = model_shape(QWEN_1_5B)
    # 2 (K, V) x 28 layers x 2 kv heads x 128 head dim x 2 bytes
    assert shape.kv_bytes_per_token == 2 * 28 * 2 * 128 * 2 == 28672
    assert model_shape(QWEN_1_5B, dtype="float32").kv_bytes_per_token == 57344
    assert model_shape({"text_config": QWEN_7B}).kv_bytes_per_token == 2 * 28 * 4 * 128 * 2


@pytest.mark.parametrize(
    ("card", "config", "weights", "util"),
    [
        ("rtx4060-laptop-8gb.txt", QWEN_1_5B, QWEN_1_5B_WEIGHTS, 0.75),
        ("rtx4090-24gb.txt", QWEN_1_5B, QWEN_1_5B_WEIGHTS, 0.25),
        ("h100-80gb.txt", QWEN_1_5B, QWEN_1_5B_WEIGHTS, 0.08),
        ("rtx4090-24gb.txt", QWEN_7B, QWEN_7B_WEIGHTS, 0.83),
        ("h100-80gb.txt", QWEN_7B, QWEN_7B_WEIGHTS, 0.25),
    ],
)
def test_utilization_is_what_the_settings_need(card: str, config: dict, weights: int, util: float) -> None:
    g = gpu(card)
    plan = plan_vllm_memory(model_shape(config), weights, g, **DEFAULTS)
    assert plan.fits, plan.reason
    assert plan.utilization == util
    # enough for the plan, and vLLM's startup check (util x total <= free) passes
    assert plan.utilization * g.total >= plan.need
    assert plan.utilization * g.total <= g.free
    assert plan.need == plan.weights + plan.kv_cache + plan.activations + plan.overhead
    assert plan.kv_cache == model_shape(config).kv_bytes_per_token * 8192 * 8


def test_1_5b_on_the_8gb_laptop_breakdown() -> None:
    plan = plan_vllm_memory(model_shape(QWEN_1_5B), QWEN_1_5B_WEIGHTS, gpu("rtx4060-laptop-8gb.txt"), **DEFAULTS)
    assert plan.kv_cache == 1_879_048_192  # 1.75 GiB: 8 sequences of 8192 tokens
    assert plan.activations == 4096 * (2 * 8960 + 4 * 1536) * 2 + 8 * 151936 * 4
    assert 5.9 * GiB < plan.need < 6.0 * GiB
    assert "--gpu-memory-utilization 0.75" in plan.reason


def test_the_seeds_32_sequences_do_not_fit_8gb_and_the_plan_says_how_many_do() -> None:
    plan = plan_vllm_memory(model_shape(QWEN_1_5B), QWEN_1_5B_WEIGHTS, gpu("rtx4060-laptop-8gb.txt"),
                            max_model_len=8192, max_num_seqs=32, max_num_batched_tokens=4096)
    assert not plan.fits and plan.utilization == 0
    assert plan.max_num_seqs_that_fit == 13
    assert "lower max_num_seqs to 13" in plan.reason


def test_7b_does_not_fit_8gb_at_all() -> None:
    plan = plan_vllm_memory(model_shape(QWEN_7B), QWEN_7B_WEIGHTS, gpu("rtx4060-laptop-8gb.txt"), **DEFAULTS)
    assert not plan.fits
    assert plan.max_num_seqs_that_fit == 0
    assert "weights alone do not fit" in plan.reason


def test_a_busy_card_counts_free_memory_not_total() -> None:
    busy = gpu("rtx4090-24gb-busy.txt")
    plan = plan_vllm_memory(model_shape(QWEN_1_5B), QWEN_1_5B_WEIGHTS, busy, **DEFAULTS)
    assert not plan.fits  # 6 GiB needed, 5.9 GiB free
    assert plan.max_num_seqs_that_fit == 6
    fewer = plan_vllm_memory(model_shape(QWEN_1_5B), QWEN_1_5B_WEIGHTS, busy, max_model_len=8192, max_num_seqs=6,
                             max_num_batched_tokens=4096)
    assert fewer.fits and fewer.utilization * busy.total <= busy.free


def test_weights_bytes_prefers_safetensors(tmp_path: Path) -> None:
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"x" * 100)
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"x" * 50)
    (tmp_path / "pytorch_model.bin").write_bytes(b"x" * 1000)
    assert weights_bytes(tmp_path) == 150
