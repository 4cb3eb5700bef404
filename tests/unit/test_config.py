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


@pytest.mark.parametrize(("url", "problem", "example"), [
    ("127.0.0.1:8012", "has no http:// or https:// in front", "http://127.0.0.1:8012"),
    ("not a url", "has no http:// or https:// in front", "http://127.0.0.1:8012"),
    ("ftp://127.0.0.1:8012", "has ftp://, not http:// or https://", "http://127.0.0.1:8012"),
    ("http://127.0.0.1:99999", "has port '99999', not a number from 1 to 65535", "http://127.0.0.1:8012"),
    ("http://127.0.0.1:0", "has port 0, not a number from 1 to 65535", "http://127.0.0.1:8012"),
    ("http://:8012", "names no host", "http://127.0.0.1:8012"),
    ("http://my server:8012", "has a host name that is not one ('my server')", "http://127.0.0.1:8012"),
    ("http://[::1:8012", "is not a URL (a bracketed IPv6 address left open?)", "http://127.0.0.1:8012"),
])
def test_a_url_no_request_can_go_to_names_the_option_the_fault_and_a_right_one(url: str, problem: str,
                                                                                example: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"backends": {"llama.cpp": {"url": url}}})
    assert str(err.value) == f"`$.backends.llama.cpp.url` = {url!r} {problem}; e.g. {example!r}"


def test_a_bad_url_of_another_kind_shows_that_kinds_address() -> None:
    with pytest.raises(ConfigError, match=r"`\$\.backends\.ollama\.url` = 'ollama:x' .*e\.g\. 'http://127\.0\.0\.1:11434'$"):
        load_config({"backend": "ollama", "backends": {"ollama": {"url": "ollama:x"}}})


@pytest.mark.parametrize("url", ["http://127.0.0.1:8012", "https://gpu.lab:8000/v1", "http://[::1]:8012",
                                 "http://localhost", "https://llm.example.org/proxy/llama"])
def test_good_urls_pass(url: str) -> None:
    assert load_config({"backends": {"llama.cpp": {"url": url}}}).active.url == url


@pytest.mark.parametrize(("raw", "path"), [
    ({"keymaps": {"accept": 123}}, "`$.keymaps.accept`"),
    ({"filetypes": {"python": "yes"}}, "`$.filetypes.python`"),
    ({"backends": {"lab": {"kind": "openai", "url": "http://h:1", "server": {"env": {"CUDA": 0}}}}},
     "`$.backends.lab.server.env.CUDA`"),
])
def test_a_bad_value_in_a_table_of_names_names_its_key(raw: dict, path: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(raw)
    assert str(err.value).endswith(f" - at {path}"), str(err.value)
    assert "[...]" not in str(err.value)
