"""A llama-swap-style proxy in front of llama-servers (github.com/mostlygeek/llama-swap): it
starts (and swaps) a llama-server for the model a request names. It routes the completion and
chat endpoints by the body's `model`, lists its models at /v1/models and those running at
/running, and passes /upstream/MODEL/PATH through to that model's own server; llama-server's
GET routes (/props) and /tokenize answer only there.

An entry with a `model` whose `/props?model=` the server does not have (404) is asked whether it
is such a proxy (GET /running); then its probes go through /upstream/MODEL, once /running lists
the model: until then a load is started in the background (a request through /upstream waits
while the proxy starts the model's server) and ModelLoading says so, as a router-mode
llama-server's loading does (the status shows `loading MODEL`, Lua asks again each second).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
import msgspec

from ..errors import ModelLoading, ProtocolError, ServerError
from ..log import log
from ..transport.limits import clip_message

if TYPE_CHECKING:
    from .base import HttpBackend

__all__ = ["running_models", "through_upstream", "upstream"]

# how long the background load may take (llama-swap's own healthCheckTimeout defaults to 120 s)
LOAD_TIMEOUT_S = 600.0


class _Process(msgspec.Struct):
    model: str
    state: str = ""


class _Running(msgspec.Struct):
    running: list[_Process]


_running_decoder = msgspec.json.Decoder(_Running)

# (proxy URL, model) -> the request that waits while the proxy starts the model's server
_loads: dict[tuple[str, str], asyncio.Task[None]] = {}
# (proxy URL, model) -> what the proxy said when its last start of the model failed
_failures: dict[tuple[str, str], str] = {}
# the models each backend had the proxy start (a failed start is then reported, not tried again)
_asked: weakref.WeakKeyDictionary[HttpBackend, set[str]] = weakref.WeakKeyDictionary()


def upstream(model: str) -> str:
    """The path prefix that reaches `model`'s own server through the proxy (a model id may
    hold slashes: the proxy matches path segments)."""
    return "/upstream/" + quote(model, safe="/")


async def running_models(backend: HttpBackend) -> set[str] | None:
    """The models the proxy has ready (GET /running); None where the server is no such proxy."""
    try:
        listed = await backend.fetch("GET", "/running", _running_decoder)
    except (ServerError, ProtocolError):
        return None
    return {p.model for p in listed.running if p.state in ("", "ready")}


async def through_upstream(backend: HttpBackend, model: str) -> str | None:
    """`upstream(model)` when the server is a llama-swap-style proxy that has `model` running;
    None when it is no such proxy. Raises ModelLoading while the proxy starts the model."""
    running = await running_models(backend)
    if running is None:
        return None
    if model in running:
        return upstream(model)
    key, asked = (backend.base, model), _asked.setdefault(backend, set())
    loading = key in _loads and not _loads[key].done()
    if not loading and model in asked and key in _failures:
        # a start this backend asked for failed: said as a failure (once per episode) instead
        # of 'loading' for ever; a new backend (new options, :LocalCopilotBackend model) tries again
        raise ServerError(f"{backend.name}: the server could not load {model}: {_failures[key]}", status=502)
    if not loading:
        asked.add(model)
        _failures.pop(key, None)
        _load(backend, model)
    raise ModelLoading(f"{backend.name}: the server is loading {model}", model=model)


def _load(backend: HttpBackend, model: str) -> None:
    """Have the proxy start `model`'s server (once at a time per model): a request through
    /upstream that the proxy answers once the server is up."""
    key = (backend.base, model)
    task = _loads.get(key)
    if task is not None and not task.done():
        return

    async def load() -> None:
        try:
            resp = await backend.client.get(backend.base + upstream(model) + "/health", headers=backend.headers(),
                                            timeout=LOAD_TIMEOUT_S)
            if resp.status_code >= 400:
                _failures[key] = f"HTTP {resp.status_code}: {clip_message(resp.text)}"
        except (httpx.HTTPError, RuntimeError) as exc:  # (RuntimeError: the client was closed meanwhile)
            log.info("%s: loading %s through the proxy: %s", backend.name, model, exc)
            _failures[key] = str(exc) or type(exc).__name__

    _loads[key] = asyncio.get_running_loop().create_task(load())
