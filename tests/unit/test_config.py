from __future__ import annotations

import pytest

from local_copilot.config import load_config
from local_copilot.errors import ConfigError


def test_no_options_means_llama_cpp_on_8012() -> None:
    cfg = load_config(None)
    assert cfg.backend == "llama.cpp"
    assert cfg.active.url == "http://127.0.0.1:8012"
    assert cfg.active.kind == "llama.cpp"
    assert set(cfg.backends) >= {"llama.cpp", "vllm", "ollama", "openai"}


def test_options_for_a_builtin_backend_merge_over_its_defaults() -> None:
    cfg = load_config({"backend": "vllm", "backends": {"vllm": {"model": "qwen2.5-coder"}}})
    assert cfg.active.kind == "openai"
    assert cfg.active.url == "http://127.0.0.1:8000"
    assert cfg.active.model == "qwen2.5-coder"


def test_empty_lua_tables_arrive_as_lists_and_are_fine() -> None:
    cfg = load_config({"filetypes": [], "keymaps": [], "backends": {}})
    assert cfg.filetypes == {}


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"n_predict": "many"}, "$.n_predict"),
        ({"n_predict": 0}, "$.n_predict"),
        ({"debounce_ms": -1}, "$.debounce_ms"),
        ({"backends": {"vllm": {"url": 8000}}}, "$.backends.vllm.url"),
        ({"backends": {"vllm": {"kind": "grpc"}}}, "$.backends.vllm.kind"),
        ({"backends": {"vllm": {"urll": "x"}}}, "$.backends.vllm"),
        ({"context": {"lines_before": 0}}, "$.context.lines_before"),
        ({"log_level": "loud"}, "$.log_level"),
        ({"nope": 1}, "nope"),
        ({"backend": "mystery"}, "$.backend"),
    ],
)
def test_errors_name_the_field_path(raw: dict, path: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(raw)
    assert path in str(err.value)


def test_a_user_backend_needs_no_builtin_name() -> None:
    cfg = load_config({"backend": "lab", "backends": {"lab": {"kind": "openai", "url": "https://gpu.lab:8000", "api_key_env": "LAB_KEY"}}})
    assert cfg.active.url == "https://gpu.lab:8000"
    assert cfg.active.api_key_env == "LAB_KEY"


def test_speculative_prefetch_is_on_for_local_servers_only_by_default() -> None:
    assert load_config({}).speculate is True
    remote = {"backend": "vllm", "backends": {"vllm": {"url": "https://gpu.lab:8000"}}}
    assert load_config(remote).speculate is False
    assert load_config({**remote, "speculative": True}).speculate is True
    assert load_config({"speculative": False}).speculate is False
