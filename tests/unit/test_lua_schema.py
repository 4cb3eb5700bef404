"""lua/local_copilot/schema.lua is generated from the option schema (config.py) and the
registry's kinds: the defaults Lua reads, the types setup() checks and the `---@class`
annotations are written once, in Python, and this test fails when the Lua copy drifts."""

from __future__ import annotations

from pathlib import Path

import msgspec

from local_copilot import config, lua_schema

ROOT = Path(__file__).resolve().parents[2]


def test_the_lua_schema_is_generated_from_the_python_one() -> None:
    # `python -m local_copilot.lua_schema` writes it
    assert (ROOT / lua_schema.LUA_SCHEMA_FILE).read_text() == lua_schema.lua_source()


def test_each_option_lua_reads_has_the_python_default() -> None:
    defaults, _ = lua_schema._shapes()
    top = msgspec.to_builtins(config.Config())
    for path in config.LUA_READS:
        name, _, sub = path.partition(".")
        assert (defaults[name][sub] if sub else defaults[name]) == (top[name][sub] if sub else top[name]), path


def test_each_option_lua_reads_or_passes_on_is_checked() -> None:
    _, checks = lua_schema._shapes()
    for path in (*config.LUA_READS, *config.LUA_PASSES):
        name, _, sub = path.partition(".")
        assert name in checks and (not sub or sub in checks[name]["fields"]), path
    assert checks["keymaps"] == {"each": "key"} and checks["context"]["fields"]["prefix_share"] == "number"
