"""The Lua type annotations of setup()'s options (lua/local_copilot/config.lua) against the
schema Python validates (config.py): the same option names in each table, the same values for
each choice, and the backend kinds the registry knows. A language server reads the annotations
to complete and check a user's setup() call; one that lists an option that does not exist, or
leaves out one that does, teaches the wrong table."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import msgspec
import pytest

from local_copilot import config
from local_copilot.backends import registry

ROOT = Path(__file__).resolve().parents[2]
CONFIG_LUA = (ROOT / "lua" / "local_copilot" / "config.lua").read_text()
KEYMAPS_LUA = (ROOT / "lua" / "local_copilot" / "keymaps.lua").read_text()

# each annotated class and the Struct that validates the same table
CLASSES: dict[str, type[msgspec.Struct]] = {
    "local_copilot.Options": config.Config,
    "local_copilot.BackendOptions": config.BackendConfig,
    "local_copilot.ContextOptions": config.ContextConfig,
    "local_copilot.PrivacyOptions": config.PrivacyConfig,
    "local_copilot.NextEditOptions": config.NextEditConfig,
    "local_copilot.EditOptions": config.EditConfig,
}


def annotated() -> dict[str, dict[str, str]]:
    """class name -> field name -> its annotated type, from the `---@class` blocks."""
    out: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in CONFIG_LUA.splitlines():
        cls = re.match(r"---@class (\S+)", line)
        if cls:
            current = out.setdefault(cls.group(1), {})
            continue
        field = re.match(r"---@field (\w+)\?? (\S+)", line)
        if field and current is not None:
            current[field.group(1)] = field.group(2)
        elif not line.startswith("---"):
            current = None
    return out


def choices(lua_type: str) -> set[str]:
    return set(re.findall(r"'([^']*)'", lua_type))


@pytest.mark.parametrize("cls", sorted(CLASSES))
def test_each_annotated_table_has_the_schemas_fields(cls: str) -> None:
    fields = {f.encode_name for f in msgspec.structs.fields(CLASSES[cls])}
    assert set(annotated()[cls]) == fields


@pytest.mark.parametrize("cls", sorted(CLASSES))
def test_each_choice_lists_the_schemas_values(cls: str) -> None:
    lua = annotated()[cls]
    for f in msgspec.structs.fields(CLASSES[cls]):
        if typing.get_origin(f.type) is typing.Literal:
            assert choices(lua[f.encode_name]) == set(typing.get_args(f.type)), f.encode_name


def test_the_kinds_are_the_registrys() -> None:
    assert choices(annotated()["local_copilot.BackendOptions"]["kind"]) == set(registry.names())


def test_the_keymaps_are_the_actions_keymaps_lua_maps() -> None:
    actions = set()
    for table in ("M.actions", "M.normal_actions"):
        body = KEYMAPS_LUA.split(table + " = {", 1)[1].split("\n}", 1)[0]
        actions |= set(re.findall(r"^\s*(\w+) = ", body, re.M))
    assert set(annotated()["local_copilot.Keymaps"]) == actions
