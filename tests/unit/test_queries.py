"""The sync calls from Lua (nvim/queries.py) that need no running host: a path's privacy
verdict under the options given or in force, and what the backend's status says before any
options came."""

from __future__ import annotations

from typing import Any

from local_copilot.config import load_config
from local_copilot.nvim.plugin import LocalCopilotPlugin


def call(plugin: LocalCopilotPlugin, *args: Any) -> Any:
    return plugin.on_call(list(args))


def test_a_secret_path_is_refused_and_an_excluded_one_only_under_options_that_exclude_it() -> None:
    plugin = LocalCopilotPlugin(None)  # type: ignore[arg-type]  (no Neovim: these calls do not reach it)
    assert call(plugin, "privacy", "/home/u/.ssh/id_ed25519")
    assert call(plugin, "privacy", "/home/u/project/main.py") == ""
    assert call(plugin, "privacy", "/home/u/project/notes.md", {"exclude": ["*.md"]})
    assert call(plugin, "privacy", "/home/u/project/notes.md") == ""
    plugin.config = load_config({"exclude": ["*.md"]})  # the options in force
    assert call(plugin, "privacy", "/home/u/project/notes.md")
    # options that do not load: the ones in force decide
    assert call(plugin, "privacy", "/home/u/project/notes.md", {"n_predict": "many"})


def test_unknown_calls_answer_nothing() -> None:
    plugin = LocalCopilotPlugin(None)  # type: ignore[arg-type]
    assert call(plugin, "no such call") is None
    assert call(plugin, "leaving") is True  # nothing started: nothing to release


def test_the_models_call_says_the_options_are_bad_or_missing() -> None:
    plugin = LocalCopilotPlugin(None)  # type: ignore[arg-type]
    plugin.config_error = "$.n_predict: expected int"
    assert call(plugin, "models") == {"models": [], "error": "$.n_predict: expected int"}
    out = call(plugin, "models", {"n_predict": "many"})
    assert out["models"] == [] and "n_predict" in out["error"]
