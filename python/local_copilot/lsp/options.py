"""The options a language client gives: `initializationOptions` and the settings of
`workspace/didChangeConfiguration`, both shaped as `setup()`'s options (the table load_config
takes), over the CLI's options file, plus `start` (start and supervise the backend's server).

Settings come either as the options themselves (Helix sends its `config` table so) or under a
section named after the server (`local_copilot`, as VS Code's and Neovim's clients nest them).
Empty settings change nothing: some clients (eglot) send them on every connection.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError

__all__ = ["SECTION", "Options", "read_options"]

SECTION = "local_copilot"


class Options:
    """The table for load_config, and whether the backend's server is to be started."""

    __slots__ = ("raw", "start")

    def __init__(self, raw: dict[str, Any], start: bool) -> None:
        self.raw, self.start = raw, start


def read_options(value: Any, base: dict[str, Any], *, initial: bool = False) -> Options | None:
    """The options in `value` over `base` (the options file); when `value` holds none, None,
    or `base` alone for the `initial` options. Raises ConfigError for a value that is no
    table, or a `start` that is no boolean."""
    if isinstance(value, dict) and isinstance(value.get(SECTION), dict):
        value = value[SECTION]
    if value is None or value == {} or value == []:
        if not initial:
            return None
        value = {}
    if not isinstance(value, dict):
        raise ConfigError(f"options must be a table such as {{ backend = 'llama.cpp' }}, got {type(value).__name__}")
    raw = {**base, **value}
    start = raw.pop("start", False)
    if not isinstance(start, bool):
        raise ConfigError(f"Expected `bool`, got `{type(start).__name__}` - at `$.start`")
    return Options(raw, start)
