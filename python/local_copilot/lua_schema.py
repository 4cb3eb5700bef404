"""lua/local_copilot/schema.lua, generated from the option schema (config.py's Structs): the
`---@class` annotations a language server reads to complete and check a user's setup() call,
and, for the options Lua reads itself (config.LUA_READS, config.LUA_PASSES), their defaults and
the types setup() checks before any of them reaches the keystroke path. The backend kinds and
the built-in backend entries are the registry's. `python -m local_copilot.lua_schema` writes it; tests/unit/test_lua_schema.py
fails when it differs from what this writes, so the schema is written once, here in Python.
"""

from __future__ import annotations

import os
import types
import typing
from typing import Any

import msgspec

from . import config
from .backend_config import BackendConfig, ServerOptions
from .backends import registry

__all__ = ["CLASSES", "LUA_SCHEMA_FILE", "lua_source"]

LUA_SCHEMA_FILE = "lua/local_copilot/schema.lua"

# each Struct and its annotated class, with what the class says of itself
CLASSES: dict[type[msgspec.Struct], tuple[str, str]] = {
    config.Config: ("local_copilot.Options", "what setup() takes (:help local-copilot-config); Python checks ranges"),
    BackendConfig: ("local_copilot.BackendOptions", "one model server (:help local-copilot-backends)"),
    ServerOptions: ("local_copilot.ServerOptions", "how the plugin starts and supervises a backend's server"),
    config.ContextConfig: ("local_copilot.ContextOptions", ""),
    config.PrivacyConfig: ("local_copilot.PrivacyOptions", ""),
    config.NextEditConfig: ("local_copilot.NextEditOptions", ""),
    config.EditConfig: ("local_copilot.EditOptions", ""),
}
# fields whose annotated type is a class written in Lua: the actions keymaps.lua maps
LUA_TYPES: dict[tuple[type[msgspec.Struct], str], str] = {(config.Config, "keymaps"): "local_copilot.Keymaps"}


def _lua_type(typ: Any, owner: type[msgspec.Struct], name: str) -> str:
    """`typ` as a LuaLS type."""
    if (owner, name) in LUA_TYPES:
        return LUA_TYPES[(owner, name)]
    if owner is BackendConfig and name == "kind":
        return "|".join(f"'{k}'" for k in registry.names())
    origin = typing.get_origin(typ)
    if origin is typing.Annotated:
        return _lua_type(typing.get_args(typ)[0], owner, name)
    if origin is typing.Literal:
        return "|".join(f"'{v}'" for v in typing.get_args(typ))
    if origin in (types.UnionType, typing.Union):
        parts = [a for a in typing.get_args(typ) if a is not type(None)]
        # a key or false: `str | bool` in Python, where only false turns it off
        if set(parts) == {str, bool}:
            return "string|false"
        return "|".join(_lua_type(a, owner, name) for a in parts)
    if origin is list:
        return _lua_type(typing.get_args(typ)[0], owner, name) + "[]"
    if origin is dict:
        key, value = typing.get_args(typ)
        return f"table<{_lua_type(key, owner, name)}, {_lua_type(value, owner, name)}>"
    if isinstance(typ, type) and issubclass(typ, msgspec.Struct):
        return CLASSES[typ][0]
    return {bool: "boolean", int: "integer", float: "number", str: "string"}[typ]


def _descriptions(struct: type[msgspec.Struct]) -> dict[str, str]:
    """What a field's `Meta(description=...)` says, by field name."""
    out = {}
    for name, hint in typing.get_type_hints(struct, include_extras=True).items():
        if typing.get_origin(hint) is typing.Annotated:
            for meta in typing.get_args(hint)[1:]:
                if isinstance(meta, msgspec.Meta) and meta.description:
                    out[name] = meta.description
    return out


def _annotations() -> list[str]:
    out: list[str] = []
    for struct, (cls, says) in CLASSES.items():
        out.append(f"---@class {cls}" + (f" {says}" if says else ""))
        words = _descriptions(struct)
        for f in msgspec.structs.fields(struct):
            desc = words.get(f.name, "")
            out.append(f"---@field {f.encode_name}? {_lua_type(f.type, struct, f.name)}" + (f" {desc}" if desc else ""))
        out.append("")
    return out


def _check(typ: Any) -> Any:
    """What config.lua's check asks of a value of type `typ`: 'boolean', 'number', 'string',
    'table', 'key' (a string, or false for none), or a table: `each` (every value of a
    table) or `fields` (the named fields of a table)."""
    origin = typing.get_origin(typ)
    if origin is typing.Annotated:
        return _check(typing.get_args(typ)[0])
    if origin is typing.Literal:
        return "string"
    if origin in (types.UnionType, typing.Union):
        parts = {a for a in typing.get_args(typ) if a is not type(None)}
        if parts == {str, bool}:
            return "key"
        raise ValueError(f"no Lua check for {typ}")
    if origin is dict:
        value = typing.get_args(typ)[1]
        each = _check(value) if not (isinstance(value, type) and issubclass(value, msgspec.Struct)) else "table"
        return {"each": each}
    if origin is list or (isinstance(typ, type) and issubclass(typ, msgspec.Struct)):
        return "table"
    return {bool: "boolean", int: "number", float: "number", str: "string"}[typ]


def _field(struct: type[msgspec.Struct], name: str) -> msgspec.structs.FieldInfo:
    return next(f for f in msgspec.structs.fields(struct) if f.name == name)


def _struct_of(typ: Any) -> type[msgspec.Struct]:
    assert isinstance(typ, type) and issubclass(typ, msgspec.Struct)
    return typ


def _shapes() -> tuple[dict[str, Any], dict[str, Any]]:
    """(defaults, types) of the options Lua reads: an option, or `option.field` of a table."""
    defaults: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    top = config.Config()
    for path in (*config.LUA_READS, *config.LUA_PASSES):
        reads = path in config.LUA_READS
        name, _, sub = path.partition(".")
        f = _field(config.Config, name)
        if not sub:
            checks[name] = _check(f.type)
            if isinstance(f.type, type) and issubclass(f.type, msgspec.Struct):
                # a whole table of fields: each is checked, and has its default
                struct = _struct_of(f.type)
                checks[name] = {"fields": {g.encode_name: _check(g.type) for g in msgspec.structs.fields(struct)}}
            if reads:
                defaults[name] = msgspec.to_builtins(getattr(top, name))
            continue
        struct = _struct_of(f.type)
        g = _field(struct, sub)
        checks.setdefault(name, {"fields": {}})["fields"][g.encode_name] = _check(g.type)
        if reads:
            defaults.setdefault(name, {})[g.encode_name] = msgspec.to_builtins(getattr(getattr(top, name), sub))
    return defaults, checks


def _lua(value: Any, indent: str = "") -> str:
    """`value` (from msgspec.to_builtins) as a Lua literal, keys in the schema's order."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, list):
        return "{ " + ", ".join(_lua(v) for v in value) + " }" if value else "{}"
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = [f"{k} = {_lua(v, indent + '  ')}" for k, v in value.items()]
        one = "{ " + ", ".join(inner) + " }"
        if len(indent) + len(one) < 100:
            return one
        return "{\n" + "".join(f"{indent}  {part},\n" for part in inner) + indent + "}"
    raise ValueError(f"no Lua literal for {value!r}")


def lua_source() -> str:
    """LUA_SCHEMA_FILE's text."""
    defaults, checks = _shapes()
    out = ["-- GENERATED by `python -m local_copilot.lua_schema` from python/local_copilot/config.py (the",
           "-- option schema) and the backend kinds of its registry. Do not edit; a test keeps it current.",
           "-- config.lua reads `defaults` and `types`; a language server reads the annotations.",
           "",
           *_annotations(),
           "local M = {}",
           "",
           "-- the defaults of the options Lua reads itself",
           "M.defaults = " + _lua(defaults),
           "",
           "-- the types setup() checks (config.lua's check): 'key' is a key, or false for none",
           "M.types = " + _lua(checks),
           "",
           "-- the built-in backend entries (config.py's and those the kinds bring), for completing",
           "-- :LocalCopilotBackend (commands.lua) beside the user's own",
           "M.builtin_backends = " + _lua(sorted(config.builtin_backends())),
           "",
           "return M"]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    # the repository: python/local_copilot/ is two folders below it
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, LUA_SCHEMA_FILE), "w", encoding="utf-8") as f:
        f.write(lua_source())
