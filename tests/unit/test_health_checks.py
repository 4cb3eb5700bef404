"""The health verdicts (health/checks.py): each failure mode gets its level and an advice that
names the fix."""

from __future__ import annotations

import pytest

from local_copilot.health import checks as hc

SUFFIX = "\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n\nprint(fibonacci(10))\n"


def fim(answer: str) -> hc.Item:
    return hc.judge_fim_answer(answer, SUFFIX, elapsed_ms=12, ttft_ms=5, backend="vllm",
                               template_hint=" (the qwen template is in use)")


def test_a_plain_completion_passes() -> None:
    item = fim("n")
    assert item.level == "ok" and "'n'" in item.message and "12 ms" in item.message


@pytest.mark.parametrize("answer", [
    "Sure! Here is the completed function:\n```python\nreturn n\n```",
    "Here's the code: n",
    "```python\nn\n```",
    "Certainly. n",
    "<|im_start|>assistant\nn",
])
def test_chat_replies_are_errors_that_name_a_fim_model(answer: str) -> None:
    item = fim(answer)
    assert item.level == "error" and "chat reply" in item.message
    assert any("base/coder model with FIM tokens" in a for a in item.advice)
    assert any("backends['vllm'].fim_template" in a for a in item.advice)


def test_repeating_the_suffix_is_an_error_that_names_the_template() -> None:
    item = fim("n\n    return fibonacci(n - 1) + fibonacci(n - 2)")
    assert item.level == "error" and "repeats the text after the cursor" in item.message
    assert "the qwen template is in use" in item.advice[0] and "fim_template" in item.advice[0]


def test_an_empty_answer_is_a_warning() -> None:
    item = fim("")
    assert item.level == "warn" and item.advice


def test_long_answers_are_shortened_in_the_message() -> None:
    assert "..." in fim("n" * 100).message


@pytest.mark.parametrize(("per_slot", "n_predict", "slots", "level"), [
    (4096, 128, 1, "ok"),
    (2048, 128, 4, "ok"),       # the seed's -c 8192 -np 4 is enough for one suggestion
    (256, 128, 4, "warn"),      # -c 512 -np 4: 80 prompt tokens left
    (256, 200, 4, "error"),     # not even the engine's minimum prompt
    (128, 128, 4, "error"),
])
def test_context_per_slot(per_slot: int, n_predict: int, slots: int, level: str) -> None:
    item = hc.judge_context(per_slot, n_predict, slots=slots)
    assert item.level == level
    if slots > 1:
        assert "--parallel" in item.message
    if level != "ok":
        joined = " ".join(item.advice)
        assert f"-np {slots}" in joined and "-c " in joined and "n_predict" in joined
        assert "context_tokens" in joined


def test_context_advice_for_vllm_names_max_model_len() -> None:
    item = hc.judge_context(256, 128, kind="vllm", backend="vllm")
    assert item.level == "warn" and "--max-model-len" in item.advice[0]


def test_prompt_room_is_reported_when_the_lines_do_not_fit() -> None:
    assert hc.judge_prompt_room(8192, 128, 200, 60) is None
    item = hc.judge_prompt_room(2048, 128, 200, 60)
    assert item is not None and item.level == "info" and "trimmed" in item.message


@pytest.mark.parametrize(("url", "level"), [
    ("http://127.0.0.1:8012", None),
    ("http://localhost:8000", None),
    ("http://[::1]:8000", None),
    ("https://gpu.example.com", None),
    ("http://gpu.example.com:8000", "warn"),
    ("http://10.0.0.5:8000", "warn"),
    ("ftp://x", "error"),
])
def test_urls(url: str, level: str | None) -> None:
    item = hc.judge_url("lab", url)
    assert (item.level if item else None) == level
    if level == "warn":
        assert item is not None and "https" in item.advice[0] and "ssh -L" in item.advice[0]


def test_api_key_env_is_checked_without_showing_the_key() -> None:
    assert hc.judge_api_key("lab", "", {}) is None
    missing = hc.judge_api_key("lab", "LAB_KEY", {})
    assert missing is not None and missing.level == "warn" and "export LAB_KEY=" in missing.advice[0]
    present = hc.judge_api_key("lab", "LAB_KEY", {"LAB_KEY": "sk-secret-123"})
    assert present is not None and present.level == "ok"
    assert "sk-secret" not in present.message + "".join(present.advice)


def test_fastapi_pin_detection() -> None:
    assert hc.fastapi_pinned_below(["fastapi[standard]<0.137.0,>=0.133.0", "torch==2.13"])
    assert hc.fastapi_pinned_below(["fastapi<0.120"])
    assert not hc.fastapi_pinned_below(["fastapi[standard]>=0.115.0"])
    assert not hc.fastapi_pinned_below(["fastapi<0.140"])
    assert not hc.fastapi_pinned_below(["prometheus-fastapi-instrumentator<0.1"])  # another package


def test_fastapi_pitfall_verdicts() -> None:
    ok = hc.judge_fastapi("/v/bin/python", "0.32.0", "0.136.3", ["fastapi[standard]<0.137.0,>=0.133.0"])
    assert ok.level == "ok"
    broken = hc.judge_fastapi("/v/bin/python", "0.30.0", "0.137.1", ["fastapi[standard]>=0.115.0"])
    assert broken.level == "error" and hc.INCLUDED_ROUTER_ERROR in broken.message
    assert broken.advice[0] == "/v/bin/python -m pip install 'fastapi<0.137'"
    forced = hc.judge_fastapi("/v/bin/python", "0.32.0", "0.138.0", ["fastapi<0.137.0"])
    assert forced.level == "warn" and "fastapi<0.137" in forced.advice[0]


NVCC_13 = "Cuda compilation tools, release 13.0, V13.0.88"


def test_nvcc_supported_gcc_from_the_header_or_the_table() -> None:
    assert hc.nvcc_max_gcc(NVCC_13, "#if __GNUC__ > 15\n#error -- unsupported GNU version!") == ("13.0", 15)
    assert hc.nvcc_max_gcc("release 12.4, V12.4.131") == ("12.4", 13)
    assert hc.nvcc_max_gcc("release 12.9, V12.9.1") == ("12.9", 14)
    assert hc.nvcc_max_gcc("no version here") == ("", None)


def test_gcc_newer_than_cuda_supports_needs_the_flashinfer_flag() -> None:
    item = hc.judge_gcc("16.1.0", "13.0", 15, {})
    assert item is not None and item.level == "warn"
    assert item.advice[0] == "export FLASHINFER_EXTRA_CUDAFLAGS=-allow-unsupported-compiler before starting vLLM"
    allowed = hc.judge_gcc("16.1.0", "13.0", 15, {"FLASHINFER_EXTRA_CUDAFLAGS": "-allow-unsupported-compiler"})
    assert allowed is not None and allowed.level == "ok"
    assert hc.judge_gcc("12", "13.0", 15, {}).level == "ok"  # type: ignore[union-attr]
    assert hc.judge_gcc("", "13.0", 15, {}) is None


def test_versions() -> None:
    assert hc.parse_version("0.137.0rc1") == (0, 137, 0)
    assert hc.version_at_least("0.137", "0.137.0") and not hc.version_at_least("0.136.3", "0.137")
    assert hc.version_at_least("v0.11.4", "0.11")
