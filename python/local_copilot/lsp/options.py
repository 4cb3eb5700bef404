"""The options a language client gives: `initializationOptions` and the settings of
`workspace/didChangeConfiguration`, both shaped as `setup()`'s options (the table load_config
takes), over the CLI's options file, plus `start` (start and supervise the backend's server).

Settings come either as the options themselves (Helix sends its `config` table so) or under a
section named after the server (`local_copilot`, as VS Code's and Neovim's clients nest them).
Empty settings change nothing: some clients (eglot) send them on every connection.

Each source goes over the options in force (config.merge_options), never over the file alone:
clients send partial settings (Neovim's client and eglot send theirs at connect), and settings
that name only `n_predict` keep the backend and the exclusions the initializationOptions gave.
The `exclude` lists of the three sources add up; a later settings change replaces only the
exclusions the settings gave before, and options that are refused still keep theirs.
"""

from __future__ import annotations

from typing import Any

from ..config import NARROWING, merge_options
from ..errors import ConfigError

__all__ = ["SECTION", "ClientOptions", "Options", "read_options"]

SECTION = "local_copilot"


class Options:
    """The table for load_config, and whether the backend's server is to be started."""

    __slots__ = ("raw", "start")

    def __init__(self, raw: dict[str, Any], start: bool) -> None:
        self.raw, self.start = raw, start


def _table(value: Any, initial: bool) -> dict[str, Any] | None:
    """The options in `value` (its `local_copilot` section when it has one); None when it
    holds none, unless these are the `initial` options. Raises ConfigError for no table."""
    if isinstance(value, dict) and (isinstance(value.get(SECTION), dict) or value.get(SECTION) == []):
        value = value[SECTION]  # (an empty Lua table is encoded as [])
    if value is None or value == {} or value == []:
        return {} if initial else None
    if not isinstance(value, dict):
        raise ConfigError(f"options must be a table such as {{ backend = 'llama.cpp' }}, got {type(value).__name__}")
    return value


def _options(raw: dict[str, Any]) -> Options:
    start = raw.pop("start", False)
    if not isinstance(start, bool):
        raise ConfigError(f"Expected `bool`, got `{type(start).__name__}` - at `$.start`")
    return Options(raw, start)


def read_options(value: Any, base: dict[str, Any], *, initial: bool = False) -> Options | None:
    """The options in `value` over `base` (config.merge_options); when `value` holds none,
    None, or `base` alone for the `initial` options. Raises ConfigError for a value that is
    no table, or a `start` that is no boolean."""
    table = _table(value, initial)
    return None if table is None else _options(merge_options(base, table))


class ClientOptions:
    """The options in force, by source: the options file, the initializationOptions and the
    settings of every didChangeConfiguration so far, each merged over the ones before it.

    `offer()` gives the options a new value would put in force; `take()` puts them in force
    once load_config accepted them, `refuse()` keeps only the exclusions of a refused value."""

    def __init__(self, file: dict[str, Any]) -> None:
        self.file = file
        self.initial: dict[str, Any] = {}
        self.settings: dict[str, Any] = {}
        self._offered: tuple[dict[str, Any], dict[str, Any]] | None = None

    def offer(self, value: Any, *, initial: bool = False) -> Options | None:
        """The options in force with `value` (the initializationOptions when `initial`, else
        settings); None when it changes nothing. Raises ConfigError as read_options does."""
        table = _table(value, initial)
        if table is None:
            return None
        sources = (table, {}) if initial else (self.initial, merge_options(self.settings, table, same_source=True))
        self._offered = sources
        return _options(merge_options(merge_options(self.file, sources[0]), sources[1]))

    def take(self) -> None:
        """The options last offered are in force."""
        if self._offered is not None:
            self.initial, self.settings = self._offered
            self._offered = None

    def refuse(self, value: Any, *, initial: bool = False) -> None:
        """`value` was refused (a bad option): the rest of it is not in force, but the
        exclusions it names are, beside those in force (a bad option never widens what is sent)."""
        self._offered = None
        try:
            table = _table(value, initial) or {}
        except ConfigError:
            return
        named = {k: table[k] for k in NARROWING
                 if isinstance(table.get(k), list) and all(isinstance(v, str) for v in table[k])}
        if initial:
            self.initial = merge_options(self.initial, named)
        else:
            self.settings = merge_options(self.settings, named)
