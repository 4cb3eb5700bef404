"""What a server tells us about its model (an OpenAI-compatible server: `/v1/models`), and which
FIM template and prompt style follow from it (prompt/styles.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

import msgspec

from ..errors import ConfigError, ProtocolError
from ..prompt.styles import CONTINUE, Decision, name_says, no_fim_family
from ..prompt.templates import FimTemplate, detect_family, get_template, names
from .served import Served

if TYPE_CHECKING:
    from ..backend_config import BackendConfig
    from .base import HttpBackend

__all__ = ["ModelInfo", "choose_model", "described_model", "listed_model", "resolve_style", "resolve_template"]


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True):
    id: str  # the name the server reports (and expects back in requests)
    owned_by: str = ""  # "vllm", "llamacpp", "ollama", ...
    n_ctx: int | None = None  # context per request (vLLM max_model_len, llama.cpp per-slot n_ctx)
    path: str = ""  # a file or folder name that may name the model better than `id`
    family: str | None = None  # a hint from the server itself (Ollama details.family)


def resolve_template(backend: str, cfg: BackendConfig, model: ModelInfo) -> FimTemplate:
    """The configured template, else the one the model's name implies; never a guess."""
    if cfg.fim_template:
        return get_template(cfg.fim_template)
    for name in (model.id, model.path, model.family or ""):
        family = detect_family(name) if name else None
        if family:
            return get_template(family)
    raise ConfigError(
        f"cannot tell the FIM format of model {model.id!r} on {backend}; set "
        f"backends[{backend!r}].fim_template to one of: {', '.join(names())} "
        f"(or prompt = 'chat' for an instruct model, 'continue' for a base model)"
    )


def configured_style(cfg: BackendConfig) -> Decision | None:
    """The style the options force, if they do: `prompt`, or a FIM template named."""
    if cfg.prompt:
        return Decision(cfg.prompt, f"configured (prompt = {cfg.prompt!r})")
    if cfg.fim_template:
        return Decision("fim", f"configured (fim_template = {cfg.fim_template!r})")
    return None


def resolve_style(backend: str, cfg: BackendConfig, model: ModelInfo) -> tuple[FimTemplate | None, Decision]:
    """The FIM template (CONTINUE for the continue style, None for chat) and the style, from
    the options or the model's names; ConfigError when the names say nothing known."""
    forced = configured_style(cfg)
    if forced is not None:
        if forced.style == "chat":
            return None, forced
        return (CONTINUE if forced.style == "continue" else resolve_template(backend, cfg, model)), forced
    names_ = [n for n in (model.id, model.path, model.family or "") if n]
    for name in names_:
        family = detect_family(name)
        if family and not no_fim_family(name):
            return get_template(family), Decision("fim", f"the model's name says {family}, a FIM family")
    for name in names_:
        says = name_says(name)
        if says == "instruct":
            return None, Decision("chat", f"no FIM family; the name {name!r} says an instruct model")
        if says == "base" or no_fim_family(name):
            return CONTINUE, Decision("continue", f"no FIM family; the name {name!r} says a base model")
    return resolve_template(backend, cfg, model), Decision("fim", "")  # raises: nothing known


class _Model(msgspec.Struct):
    id: str
    owned_by: str = ""
    max_model_len: int | None = None
    root: str | None = None


class _Models(msgspec.Struct):
    data: list[_Model] = []


_models_decoder = msgspec.json.Decoder(_Models)


class _Listed(Protocol):
    @property
    def id(self) -> str: ...


L = TypeVar("L", bound=_Listed)


def choose_model(backend: HttpBackend, models: Sequence[L], default: L | None, *, unknown: str, no_default: str) -> L:
    """The model among those a server lists that `backend`'s entry names (its `model`), else
    `default`. What is said when there is none: `unknown` (with {wanted} and {ids}, the ids
    listed) for a named model not listed, `no_default` without one."""
    wanted = backend.cfg.model
    if wanted:
        chosen = next((m for m in models if m.id == wanted), None)
        if chosen is None:
            ids = ", ".join(m.id for m in models) or "none"
            raise ProtocolError(f"{backend.name}: " + unknown.format(wanted=repr(wanted), ids=ids))
        return chosen
    if default is None:
        raise ProtocolError(f"{backend.name}: {no_default}")
    return default


async def listed_model(backend: HttpBackend) -> ModelInfo:
    """Ask `/v1/models` which model runs (and its context length, on vLLM): the configured
    one, else the first listed. Instruction edits' chat endpoint asks the same (chat.py)."""
    models = (await backend.fetch("GET", "/v1/models", _models_decoder)).data
    chosen = choose_model(backend, models, models[0] if models else None,
                          unknown="the server has no model {wanted} (it serves: {ids})",
                          no_default="the server lists no models")
    return ModelInfo(id=chosen.id, owned_by=chosen.owned_by, n_ctx=chosen.max_model_len, path=chosen.root or "")


def described_model(cfg: BackendConfig, style: str, model: ModelInfo, template: FimTemplate | None,
                    context: int | None, *, server_template: str = "the server's own") -> Served:
    """What :checkhealth tells of a server whose model was probed (`/v1/models`, Ollama's
    `/api/show`); `server_template`: whose FIM template is used when none is rendered here."""
    prompt: tuple[Literal["ok", "info"], str] | None = None
    if style != "fim":
        pass  # no FIM template to tell of
    elif template is not None:
        how = "configured" if cfg.fim_template else "detected from the model name"
        prompt = ("ok", f"FIM template: {template.name} ({how})")
    else:
        prompt = ("info", f"FIM template: {server_template}")
    return Served(model=model.id + (f" ({model.owned_by})" if model.owned_by else ""), hint=model.path or model.id,
                  prompt=prompt, context=context, program=model.owned_by)
