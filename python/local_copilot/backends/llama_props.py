"""What a llama-server tells of itself: `/props` (its per-slot context, its slots, its model
and chat template), and on a router-mode server (one server, several models) which models it
serves and whether the entry's is loaded, asking it to load it. The completion dialect
(llama_cpp.py) and the instruction edits' chat client (llama_chat.py) both ask it here.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import msgspec

from ..errors import ConfigError, ModelLoading, ProtocolError, ServerError
from ..log import log
from . import models, swap

if TYPE_CHECKING:
    from ..backend_config import BackendConfig
    from .base import HttpBackend

__all__ = ["Props", "model_query", "server_models", "server_props"]


class _GenSettings(msgspec.Struct):
    n_ctx: int = 0


class Props(msgspec.Struct):
    default_generation_settings: _GenSettings = msgspec.field(default_factory=_GenSettings)
    role: str = ""  # "router": one server, several models (`--models-dir`); the model is named per request
    total_slots: int = 1
    model_path: str = ""
    model_alias: str = ""
    # the model's chat template, or llama-server's fallback for a model without one; None: the
    # server does not say (an old llama-server)
    chat_template: str | None = None
    # set here, not by the server: the path prefix before llama-server's own routes (a
    # llama-swap-style proxy's /upstream/MODEL, swap.py), '' on llama-server itself
    via: str = ""


_props_decoder = msgspec.json.Decoder(Props)

_ignored = msgspec.json.Decoder(Any)


def model_query(cfg: BackendConfig) -> str:
    """The query that names the entry's model on a router-mode llama-server (one server,
    several models, each loaded when a request names it); a plain llama-server ignores it."""
    return f"?model={quote(cfg.model, safe='')}" if cfg.model else ""


async def server_props(backend: HttpBackend) -> Props:
    """`/props`: the per-slot context (`-c` split over `--parallel` slots) and the model. On a
    router-mode server, the entry's `model`'s, once the router has it loaded (ModelLoading
    until then: the request that names an unloaded model would wait for all of its loading).
    Instruction edits' chat endpoint asks the same (LlamaChat)."""
    cfg = backend.cfg
    if cfg.model:
        await _loaded(backend, cfg.model)
    try:
        props = await backend.fetch("GET", "/props" + model_query(cfg), _props_decoder)
    except ServerError as exc:
        # no /props there: a llama-swap-style proxy answers it only through /upstream/MODEL
        via = await swap.through_upstream(backend, cfg.model) if exc.status == 404 and cfg.model else None
        if via is None:
            raise
        props = msgspec.structs.replace(await backend.fetch("GET", via + "/props", _props_decoder), via=via)
    if props.role == "router":
        served = await server_models(backend)
        raise ConfigError(f"{backend.name}: {cfg.url} is a llama-server router serving several models; set "
                          f"backends.{backend.name}.model to one of: {', '.join(served) or '(none listed)'}")
    return props


async def server_models(backend: HttpBackend) -> list[str]:
    """The models a router-mode llama-server serves (GET /models), [] where it lists none."""
    try:
        listed = await backend.fetch("GET", "/models", models.DECODER)
    except (ServerError, ProtocolError):
        return []
    return [m.id for m in listed.data]


# the models each backend asked a router to load (a failed load is then reported, not asked again)
_asked: weakref.WeakKeyDictionary[HttpBackend, set[str]] = weakref.WeakKeyDictionary()


async def _loaded(backend: HttpBackend, model: str) -> None:
    """Return once a router-mode server has `model` loaded (at once on any other server);
    raises ModelLoading while it loads it, having asked it to (POST /models/load) if it had
    not started."""
    try:
        listed = await backend.fetch("GET", "/models", models.DECODER)
    except (ServerError, ProtocolError):
        return  # no router: the model named is the one served, or the server says so itself
    found = next((m for m in listed.data if m.id == model), None)
    if found is None or found.status is None:
        return  # not one of its models: the request says what the server thinks of it
    state = found.status.value
    if state == "loaded":
        return
    asked = _asked.setdefault(backend, set())
    if found.status.failed and model in asked:
        # it failed to load since this backend asked: said as a failure (once per episode)
        # instead of 'loading' for ever; a new backend (new options, :LocalCopilotBackend
        # model or restart) asks once more
        code = f" (its llama-server exited with code {found.status.exit_code})" if found.status.exit_code else ""
        raise ServerError(f"{backend.name}: the server could not load {model}{code}; see the server's log", status=500)
    if state not in ("loading",):
        asked.add(model)
        try:
            await backend.fetch("POST", "/models/load", _ignored, json={"model": model})
        except (ServerError, ProtocolError) as exc:
            log.info("%s: asking the router to load %s: %s", backend.name, model, exc)
    raise ModelLoading(f"{backend.name}: the server is loading {model}", model=model)
