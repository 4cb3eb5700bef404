"""User configuration: typed msgspec Structs, validated once, errors name the field path.

The Lua `setup(opts)` stores the user's table as it is; Python merges it over the defaults
here (built-in backends included) and converts it. A bad value gives a `ConfigError` whose
message names the path, e.g. "Expected `int`, got `str` - at `$.n_predict`".
"""

from __future__ import annotations

import copy
import typing
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import msgspec
from msgspec import Meta

from .backend_config import BackendConfig
from .config_hints import hint, nearest
from .errors import ConfigError
from .transport.access import ca_file_problem

__all__ = ["BackendConfig", "Config", "ContextConfig", "EditConfig", "NextEditConfig", "PrivacyConfig", "BUILTIN_BACKENDS",
           "LUA_PASSES", "LUA_READS", "NARROWING", "builtin_backends", "load_config", "merge_options", "url_problem"]

PositiveInt = Annotated[int, Meta(gt=0)]
NonNegInt = Annotated[int, Meta(ge=0)]


class _Base(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class ContextConfig(_Base, frozen=True):  # type: ignore[misc]  # msgspec allows a frozen subclass
    # lines of the buffer around the cursor that Lua sends with each snapshot
    lines_before: PositiveInt = 200
    lines_after: NonNegInt = 60
    # share of the local window's token budget that goes to the text before the cursor
    prefix_share: Annotated[float, Meta(gt=0, lt=1)] = 0.75
    # tokens for chunks of other buffers, yanks and jump sites (0 turns cross-file context off)
    extra_tokens: NonNegInt = 1024
    # definitions of the names near the cursor from the buffer's language servers (Neovim)
    lsp: bool = True
    # the user's recent edits at other places (other files, or out of the window), newest first
    edits: bool = True


class PrivacyConfig(_Base, frozen=True):  # type: ignore[misc]  # msgspec allows a frozen subclass
    """Beside the built-in rules and `exclude` (python/local_copilot/privacy/policy.py)."""

    # a file in gitignore syntax, looked for in each file's directory and those above it;
    # the files it lists are never read or sent ('' turns it off)
    ignore_file: str = ".local-copilot-ignore"
    # also never send files that git ignores (one `git check-ignore` per file)
    git_ignored: bool = False


class NextEditConfig(_Base, frozen=True):  # type: ignore[misc]  # msgspec allows a frozen subclass
    """Next edits (python/local_copilot/next_edit/): the edit the user will make next."""

    enabled: bool = False
    # a name in `backends` serving a next-edit model; '' = the ghost-text backend
    backend: str = ""
    # '' = detect from the served model's name and vocabulary; else 'sweep', 'zeta' or 'zeta2'
    format: Literal["", "sweep", "zeta", "zeta2"] = ""
    # Lua waits this long after the last change before asking
    debounce_ms: NonNegInt = 100
    # the answer's cap, by size: a rewritten region longer than this is not shown
    n_predict: PositiveInt = 512
    # the edit history: events, bytes and minutes kept
    history_events: PositiveInt = 16
    history_bytes: PositiveInt = 16_384
    history_minutes: PositiveInt = 10
class EditConfig(_Base, frozen=True):  # type: ignore[misc]  # msgspec allows a frozen subclass
    """Instruction edits (python/local_copilot/instruct/): select code, say what to change."""

    # the backend entry whose chat endpoint answers ('' = the active one); an instruct model
    # beside the FIM base model is an entry of its own, e.g. backends = { inst = { ... } }
    backend: str = ""
    # the most tokens an answer may have (the server's context per request may cap it lower)
    n_predict: PositiveInt = 1024
    temperature: Annotated[float, Meta(ge=0)] = 0.1
    # lines above and below the selection sent as context (fewer when the context is small)
    context_lines: NonNegInt = 60
    # while the instruction is typed, have the server evaluate the prompt so far
    # (llama.cpp: `n_predict: 0`); the answer then starts sooner
    warm: bool = True
    # how long the server may stay silent mid-answer (a long prompt's first token takes a while)
    timeout_ms: PositiveInt = 60_000
    # keys that act on the preview while it is shown (normal mode, buffer-local; false = none)
    accept_key: str | bool = "<Tab>"
    cancel_key: str | bool = "<Esc>"


class Config(_Base):
    # (a `description` is what the option's Lua annotation says of it: lua_schema.py)
    backend: Annotated[str, Meta(description="the active entry of `backends`")] = "llama.cpp"
    backends: dict[str, BackendConfig] = {}
    # entries that answer ghost text, in order, when the active one is down, refuses, or has
    # not started answering within fallback_after_ms (pipeline/fallback.py)
    fallback: Annotated[list[str], Meta(description="entries tried in order when the active one cannot answer")] = []
    fallback_after_ms: PositiveInt = 1500
    filetypes: Annotated[dict[str, bool], Meta(description="`['*']` for the rest")] = {}
    keymaps: dict[str, str | bool] = {}
    auto_trigger: bool = True
    # the Lua side reads these; listed here so they are validated like the rest
    adaptive_debounce: bool = False
    hide_during_completion: bool = True
    request_during_completion: bool = False
    # the in-process language server for completion menus (lua/local_copilot/lsp.lua)
    lsp: Annotated[bool, Meta(description="an in-process language server for completion menus")] = False
    # when the cursor rests at a new place in Normal mode, have the server evaluate its prompt
    # with nothing to generate, so the first key there finds it cached (llama.cpp only)
    warm_up: bool = True
    n_predict: PositiveInt = 128
    # right after a keystroke ask for this many tokens only (shown within milliseconds, and a
    # request made stale by the next key has already stopped); the rest up to n_predict is
    # fetched once typing pauses. 0 (or >= n_predict): one request of n_predict tokens.
    # Only where a request can continue a text (the prompt ends with the typed text)
    n_predict_first: NonNegInt = 6
    # server-side cap on generation time once a newline was produced (llama.cpp t_max_predict_ms)
    t_max_predict_ms: PositiveInt = 500
    debounce_ms: NonNegInt = 0
    # a suggestion at a new place should arrive within about this long: the context around the
    # cursor is sized from the server's measured prompt speed (all of it on a fast GPU, less on
    # a slow CPU, never less than ~512 characters); prompt/speed.py
    latency_target_ms: PositiveInt = 1000
    max_lines: PositiveInt = 16
    # reuse suggestions: trim while the user types what is shown, and answer a spot seen
    # before from the cache; false sends a request for every change (to measure the saving)
    reuse: bool = True
    # after a suggestion is shown, compute the next one as if it were accepted (cache only);
    # None = on for servers on this machine, off for shared ones (it doubles their load)
    speculative: bool | None = None
    context: ContextConfig = ContextConfig()
    # globs of files never read or sent, beside the built-in secret rules (privacy.py)
    exclude: Annotated[list[str], Meta(description="path patterns never sent")] = []
    privacy: PrivacyConfig = PrivacyConfig()
    next_edit: NextEditConfig = NextEditConfig()
    edit: EditConfig = EditConfig()
    log_level: Literal["debug", "info", "warn", "error"] = "warn"

    @property
    def active(self) -> BackendConfig:
        return self.backends[self.backend]

    @property
    def speculate(self) -> bool:
        if self.speculative is not None:
            return self.speculative
        host = urlsplit(self.active.url).hostname or ""
        return host in ("localhost", "::1") or host.startswith("127.")


# The options Lua reads itself, an option or a table's field: lua/local_copilot/schema.lua holds
# their defaults and the types setup() checks (a wrong one would fail on the keystroke path, a
# stack trace per key), generated from these Structs by lua_schema.py. Python checks every
# option, ranges too. LUA_PASSES: those Lua passes on whole, checked for their type only.
LUA_READS = ("auto_trigger", "debounce_ms", "adaptive_debounce", "hide_during_completion", "request_during_completion",
             "reuse", "warm_up", "lsp", "filetypes", "keymaps", "context", "next_edit.enabled", "next_edit.debounce_ms",
             "edit.context_lines", "edit.warm", "edit.accept_key", "edit.cancel_key")
LUA_PASSES = ("backend", "backends", "exclude", "next_edit.backend", "edit.backend")


# Defaults for the built-in backend names; user options merge over these, field by field.
BUILTIN_BACKENDS: dict[str, dict[str, Any]] = {
    "llama.cpp": {"kind": "llama.cpp", "url": "http://127.0.0.1:8012"},
    "vllm": {"kind": "openai", "url": "http://127.0.0.1:8000"},
    "ollama": {"kind": "ollama", "url": "http://127.0.0.1:11434"},
    "openai": {"kind": "openai", "url": "http://127.0.0.1:8080"},
}


def builtin_backends() -> dict[str, dict[str, Any]]:
    """BUILTIN_BACKENDS and an entry for each kind that brings its own (`Kind.builtin`:
    `sglang`, `lmstudio`), named as the kind, at the kind's default URL."""
    from .backends import registry  # the kinds: asked when options are loaded, not on import

    return {**registry.builtin_entries(), **BUILTIN_BACKENDS}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


# the lists of options that narrow what is sent: where options come from several sources (the
# CLI's options file, a language client's initializationOptions and settings), the entries of
# each source add up, so a source that names none never widens what another kept back
NARROWING = ("exclude",)


def merge_options(base: dict[str, Any], over: dict[str, Any], *, same_source: bool = False) -> dict[str, Any]:
    """The options table `over` merged over `base` (the options in force): tables field by
    field, other values replaced; an empty table (`[]` from Lua or a JSON encoder of Lua's
    tables) changes nothing. A list in NARROWING adds its entries to those of `base`, unless
    `over` comes from the same source as `base` (a client's later settings replace its own).

    >>> merge_options({"exclude": ["*.env"], "backends": {"a": {"url": "u", "model": "m"}}},
    ...               {"exclude": ["*.key"], "backends": {"a": {"model": "n"}}, "n_predict": 8})
    {'exclude': ['*.env', '*.key'], 'backends': {'a': {'url': 'u', 'model': 'n'}}, 'n_predict': 8}
    """
    out = _over(base, {k: v for k, v in over.items() if k not in NARROWING})
    for key in NARROWING:
        if key not in over:
            continue
        new = [] if over[key] == {} else over[key]
        old = out.get(key)
        if same_source or not isinstance(old, list) or not isinstance(new, list):
            out[key] = copy.deepcopy(new)
        else:
            out[key] = old + [v for i, v in enumerate(new) if v not in old and v not in new[:i]]
    return out


def _over(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        old = out.get(key)
        if isinstance(old, dict) and (isinstance(value, dict) or value == []):
            out[key] = _over(old, value or {})
        else:
            out[key] = copy.deepcopy(value)
    return out


def _convert(value: Any, typ: type[Any], path: str) -> Any:
    if value == []:
        value = {}
    _convert_dict_values(value, typ, path)
    try:
        return msgspec.convert(value, typ, strict=False)
    except msgspec.ValidationError as exc:
        msg = str(exc)
        extra = hint(msg, typ)  # the way out: the field meant, the values a choice takes
        msg = msg.replace("`$", f"`{path}") if " - at `$" in msg else f"{msg} - at `{path}`"
        raise ConfigError(msg + extra) from None


def _convert_dict_values(value: Any, typ: Any, path: str) -> None:
    """msgspec names a bad value in a dict field `$.keymaps[...]`, without its key: the
    values of a Struct's dict fields (and of its Structs' ones) are converted one by one
    first, so the error names the key: `$.keymaps.accept`."""
    if not isinstance(value, dict) or not (isinstance(typ, type) and issubclass(typ, msgspec.Struct)):
        return
    for field in msgspec.structs.fields(typ):
        item = value.get(field.encode_name)
        if not isinstance(item, dict):
            continue
        ftype = field.type
        while typing.get_origin(ftype) is Annotated:  # (a described field: its type is inside)
            ftype = typing.get_args(ftype)[0]
        if typing.get_origin(ftype) is dict:
            item_type = typing.get_args(ftype)[1]
            for key, each in item.items():
                if not isinstance(each, msgspec.Struct):  # (backends: converted already)
                    _convert(each, item_type, f"{path}.{field.name}.{key}")
        else:
            _convert_dict_values(item, ftype, f"{path}.{field.name}")


def url_problem(url: str) -> str | None:
    """What makes `url` no server address the plugin can use, or None.

    >>> url_problem("http://127.0.0.1:8012"), url_problem("127.0.0.1:8012")
    (None, 'has no http:// or https:// in front')
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # urlsplit's own words name neither the URL nor the fix
        if "Port" not in str(exc):
            return "is not a URL (a bracketed IPv6 address left open?)"
        tail = url.rsplit(":", 1)[-1].split("/", 1)[0]
        return f"has port {tail!r}, not a number from 1 to 65535"
    if parts.scheme not in ("http", "https"):
        return f"has {parts.scheme}://, not http:// or https://" if "://" in url else "has no http:// or https:// in front"
    host = parts.hostname or ""
    if not host:
        return "names no host"
    if any(c.isspace() for c in url) or not all(c.isalnum() or c in ".-_:%[]" for c in host):
        return f"has a host name that is not one ({host!r})"
    if port == 0:
        return "has port 0, not a number from 1 to 65535"
    return None


def _check_url(name: str, url: str, default: str) -> None:
    """The message says what is wrong and shows a right one: the user's own address with the
    scheme in front where that is all it lacks, else the kind's default."""
    problem = url_problem(url)
    if problem is None:
        return
    example = f"http://{url}" if "://" not in url and url_problem(f"http://{url}") is None else default
    raise ConfigError(f"`$.backends.{name}.url` = {url!r} {problem}; e.g. {example!r}")


def _check_tls(name: str, bcfg: BackendConfig) -> None:
    """A CA file no handshake could use fails every request alike: said once, here."""
    if bcfg.ca_file and bcfg.tls_verify:
        problem = ca_file_problem(bcfg.ca_file)
        if problem is not None:
            raise ConfigError(f"`$.backends.{name}.ca_file` = {bcfg.ca_file!r} {problem}; give the path of the "
                              "CA's certificate in PEM form (-----BEGIN CERTIFICATE-----)")


def load_config(raw: Any = None) -> Config:
    """Merge the user's options over the defaults and validate them.

    >>> load_config({"n_predict": 64}).n_predict
    64
    """
    if raw is None or raw == []:  # an empty Lua table arrives as a list
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"options must be a table, got {type(raw).__name__}")
    user_backends = raw.get("backends") or {}
    if not isinstance(user_backends, dict):
        got = "array" if isinstance(user_backends, list) else type(user_backends).__name__
        raise ConfigError(f"Expected `object`, got `{got}` - at `$.backends`")
    from .backends import registry  # the kinds: asked when options are loaded, not on import

    merged = dict(raw)
    builtins = builtin_backends()
    backends = _merge(builtins, {k: v or {} for k, v in user_backends.items()})
    registry.check_entries(backends, builtins)
    # converted one by one so an error names the backend: `$.backends.vllm.url`, not `$.backends[...]`
    merged["backends"] = {name: _convert(value, BackendConfig, f"$.backends.{name}") for name, value in backends.items()}
    for name, bcfg in merged["backends"].items():
        # an address no request can go to would fail on every key without a word (requests
        # to it raise before any connection): said once, here, like any bad option
        _check_url(name, bcfg.url, registry.get(bcfg.kind).default_url)
        _check_tls(name, bcfg)
        registry.check_recipe(bcfg.server.recipe, f"$.backends.{name}.server.recipe")
    # empty Lua tables arrive as lists; they mean "no entries"
    for key in ("filetypes", "keymaps", "context", "privacy", "next_edit", "edit"):
        if merged.get(key) == []:
            merged[key] = {}
    for key in ("exclude", "fallback"):  # and an empty list may arrive as a table
        if merged.get(key) == {}:
            merged[key] = []
    cfg: Config = _convert(merged, Config, "$")
    if cfg.backend not in cfg.backends:
        near = nearest(cfg.backend, cfg.backends)
        raise ConfigError(f"unknown backend {cfg.backend!r} - at `$.backend`; "
                          + (f"did you mean {near!r}? " if near else "") + f"choose one of: {', '.join(sorted(cfg.backends))}")
    for i, name in enumerate(cfg.fallback):
        if name not in cfg.backends:
            names = ", ".join(sorted(cfg.backends))
            raise ConfigError(f"unknown backend {name!r} - at `$.fallback[{i}]`; choose one of: {names}")
        if name == cfg.backend or name in cfg.fallback[:i]:
            raise ConfigError(f"{name!r} is the active backend or named before - at `$.fallback[{i}]`; "
                              "list each entry to fall back on once, the active one not")
    for part, name in (("next_edit", cfg.next_edit.backend), ("edit", cfg.edit.backend)):
        if name and name not in cfg.backends:
            names = ", ".join(sorted(cfg.backends))
            raise ConfigError(f"unknown backend {name!r} - at `$.{part}.backend`; choose one of: {names}")
    return cfg
