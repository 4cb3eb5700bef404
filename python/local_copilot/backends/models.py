"""The models a server lists, for `:LocalCopilotBackend model NAME`, its completion, `doctor`
and `:checkhealth`.

A router-mode llama-server (`--models-dir`) answers GET /models with each model's state
(`loaded`, `loading`, `unloaded`, `sleeping`, `downloading`; `failed` beside `unloaded` when its
last load failed); an OpenAI-compatible server and a llama-swap-style proxy answer GET
/v1/models with the ids only. Whichever answers first is used; a llama-swap-style proxy's
/running then tells which of them are loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from ..errors import ProtocolError, ServerError
from ..transport.access import async_client
from . import swap
from .base import HttpBackend

if TYPE_CHECKING:
    from ..backend_config import BackendConfig

__all__ = ["DECODER", "Listed", "ListedModel", "ModelList", "ModelStatus", "describe", "entry_models", "list_models",
           "model_problem"]

PATHS = ("/models", "/v1/models")


class ModelStatus(msgspec.Struct):
    value: str = ""
    failed: bool = False  # beside "unloaded": its last load failed
    exit_code: int | None = None


class ListedModel(msgspec.Struct):
    id: str
    status: ModelStatus | None = None


class ModelList(msgspec.Struct):
    data: list[ListedModel] = []


DECODER = msgspec.json.Decoder(ModelList)  # GET /models and /v1/models (a router's states where it says them)


class Listed(msgspec.Struct, frozen=True):
    id: str
    # '' where the server does not say (an OpenAI-compatible list, a llama-swap-style proxy)
    state: str = ""


def _state(m: ListedModel) -> str:
    if m.status is None:
        return ""
    return "failed" if m.status.failed and m.status.value == "unloaded" else m.status.value


async def list_models(backend: HttpBackend) -> list[Listed]:
    """The models the server lists ([] where neither path answers a list). A server that
    cannot be reached raises, as any probe does."""
    for path in PATHS:
        try:
            listed = await backend.fetch("GET", path, DECODER)
        except (ServerError, ProtocolError):
            continue
        models = [Listed(m.id, _state(m)) for m in listed.data]
        if path == "/v1/models" and models and not any(m.state for m in models):
            running = await swap.running_models(backend)
            if running is not None:
                models = [Listed(m.id, "loaded" if m.id in running else "unloaded") for m in models]
        return models
    return []


async def entry_models(name: str, entry: BackendConfig, timeout_s: float = 3.0) -> list[Listed]:
    """The models the server of backend entry `name` lists, asked with its trust and token."""
    async with async_client([entry], timeout=timeout_s) as client:
        backend = HttpBackend(name, entry, client)
        try:
            return await list_models(backend)
        finally:
            backend.close()


def describe(models: list[Listed]) -> str:
    """'a (loaded), b (unloaded)': each id, with its state where the server says it."""
    return ", ".join(f"{m.id} ({m.state})" if m.state else m.id for m in models)


def model_problem(name: str, url: str, model: str, models: list[Listed]) -> str | None:
    """Why entry `name` cannot use `model` on the server at `url` that lists `models`, or None.

    >>> model_problem("team", "http://h:8012", "b", [Listed("a", "loaded")])
    "team: the server at http://h:8012 has no model 'b'; choose one of: a (loaded)"
    """
    if not models:
        return (f"{name}: the server at {url} lists no models (GET /models and /v1/models); a model is chosen "
                "per request on a router-mode llama-server (--models-dir) or a proxy such as llama-swap")
    if any(m.id == model for m in models):
        return None
    return f"{name}: the server at {url} has no model {model!r}; choose one of: {describe(models)}"
