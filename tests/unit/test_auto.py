"""`auto`: vLLM when the model fits in free GPU memory and vLLM is installed, else llama.cpp."""

from __future__ import annotations

from pathlib import Path

from local_copilot.server_options import ServerOptions
from local_copilot.servers.auto import choose_backend
from local_copilot.servers.memory import parse_nvidia_smi

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nvidia_smi"
QWEN_1_5B = {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
             "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
             "torch_dtype": "bfloat16"}
W_1_5B = 3_087_467_144
QWEN_7B = {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
           "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 32768}
W_7B = 15_231_233_024


def gpus(name: str):  # noqa: ANN201
    return parse_nvidia_smi((FIXTURES / name).read_text())


def test_fits_and_installed_means_vllm() -> None:
    c = choose_backend(gpus=gpus("rtx4060-laptop-8gb.txt"), vllm_installed=True, model="Qwen/Qwen2.5-Coder-1.5B",
                       config=QWEN_1_5B, weights=W_1_5B)
    assert c.backend == "vllm"
    assert c.plan is not None and c.plan.utilization == 0.75
    assert c.reason.startswith("vllm: Qwen/Qwen2.5-Coder-1.5B fits in GPU memory")


def test_too_big_for_free_memory_means_llama_cpp_with_offload() -> None:
    c = choose_backend(gpus=gpus("rtx4060-laptop-8gb.txt"), vllm_installed=True, model="Qwen/Qwen2.5-Coder-7B",
                       config=QWEN_7B, weights=W_7B)
    assert c.backend == "llama.cpp"
    assert "partial offload" in c.reason and "does not fit" in c.reason
    # the same model on a 24 GB card fits
    assert choose_backend(gpus=gpus("rtx4090-24gb.txt"), vllm_installed=True, model="m", config=QWEN_7B,
                          weights=W_7B).backend == "vllm"


def test_free_memory_not_total_decides() -> None:
    busy = gpus("rtx4090-24gb-busy.txt")
    assert choose_backend(gpus=busy, vllm_installed=True, model="m", config=QWEN_1_5B,
                          weights=W_1_5B).backend == "llama.cpp"
    fewer = ServerOptions(max_num_seqs=4)
    assert choose_backend(gpus=busy, vllm_installed=True, model="m", config=QWEN_1_5B, weights=W_1_5B,
                          options=fewer).backend == "vllm"


def test_no_gpu_means_llama_cpp_on_cpu() -> None:
    c = choose_backend(gpus=None, vllm_installed=True, model="m", config=QWEN_1_5B, weights=W_1_5B)
    assert c.backend == "llama.cpp" and "no NVIDIA GPU" in c.reason
    hidden = choose_backend(gpus=gpus("h100-80gb.txt"), vllm_installed=True, model="m", config=QWEN_1_5B,
                            weights=W_1_5B, env={"CUDA_VISIBLE_DEVICES": ""})
    assert hidden.backend == "llama.cpp" and "CUDA_VISIBLE_DEVICES" in hidden.reason


def test_vllm_not_installed_means_llama_cpp() -> None:
    c = choose_backend(gpus=gpus("h100-80gb.txt"), vllm_installed=False, model="m", config=QWEN_1_5B,
                       weights=W_1_5B)
    assert c.backend == "llama.cpp" and "vLLM is not installed" in c.reason and "make vllm" in c.reason


def test_unknown_model_size_means_llama_cpp() -> None:
    c = choose_backend(gpus=gpus("h100-80gb.txt"), vllm_installed=True, model="org/not-downloaded")
    assert c.backend == "llama.cpp" and "not on this machine" in c.reason
