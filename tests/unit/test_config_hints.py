"""The way out of a bad option (config_hints.py): the name meant for a misspelt one, the values
of a choice, as load_config's message ends."""

from __future__ import annotations

import pytest

from local_copilot.config import load_config
from local_copilot.config_hints import nearest
from local_copilot.errors import ConfigError


def said(raw: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(raw)
    return str(info.value)


def test_a_misspelt_field_names_the_one_meant_at_any_depth() -> None:
    assert said({"n_predic": 5}) == "Object contains unknown field `n_predic` - at `$`; did you mean `n_predict`?"
    assert said({"backends": {"llama.cpp": {"ulr": "x"}}}).endswith("- at `$.backends.llama.cpp`; did you mean `url`?")
    assert said({"backends": {"llama.cpp": {"server": {"parralel": 2}}}}).endswith(
        "- at `$.backends.llama.cpp.server`; did you mean `parallel`?")
    assert said({"next_edit": {"enable": True}}).endswith("; did you mean `enabled`?")


def test_a_name_near_nothing_lists_the_valid_ones() -> None:
    assert said({"context": {"zzz": 1}}).endswith(
        "; valid names: lines_before, lines_after, prefix_share, extra_tokens, lsp, edits")


def test_a_choice_lists_its_values() -> None:
    assert said({"log_level": "warning"}).endswith(
        "; did you mean 'warn'? It takes one of: 'debug', 'info', 'warn', 'error'")
    assert said({"backends": {"llama.cpp": {"prompt": "fill"}}}).endswith(
        "; choose one of: '', 'fim', 'continue', 'chat'")


def test_a_backend_name_misspelt_or_given_as_a_kind() -> None:
    assert said({"backend": "lama.cpp"}).startswith("unknown backend 'lama.cpp' - at `$.backend`; did you mean 'llama.cpp'?")
    assert "'vllm' servers speak kind 'openai'" in said({"backends": {"team": {"kind": "vllm"}}})


def test_nearest_takes_a_slip_of_case_or_a_prefix_and_nothing_far() -> None:
    assert nearest("N_PREDICT", ["n_predict"]) == "n_predict"
    assert nearest("acc", ["accept", "dismiss"]) == "accept"
    assert nearest("zzzz", ["accept", "dismiss"]) is None
