"""Which kind of server answers at a URL, from what only that kind answers (each kind's
`signature` in the registry: SGLang's `/get_model_info`, LM Studio's `/api/v0/models`).
:checkhealth says so when an entry's kind does not fit its server, and the bench picks the
kind of a bare URL by it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from ..transport.access import auth_headers
from . import registry

if TYPE_CHECKING:
    from ..backend_config import BackendConfig

__all__ = ["detect", "detect_sync", "guess_sync", "signatures"]


def signatures() -> list[tuple[str, registry.Signature]]:
    found = []
    for name in registry.names():
        sig = registry.get(name).signature
        if sig is not None:
            found.append((name, sig))
    return found


def _judge(sig: registry.Signature, resp: httpx.Response) -> str | None:
    if resp.status_code != 200:
        return None
    try:
        doc: Any = resp.json()
    except ValueError:
        return None
    return sig.says(doc)


async def detect(client: httpx.AsyncClient, cfg: BackendConfig) -> tuple[str, str] | None:
    """(kind, what the server says of itself) for the first signature the server at `cfg.url`
    answers, asked with the entry's token; None when it answers none."""
    for name, sig in signatures():
        try:
            said = _judge(sig, await client.get(cfg.url.rstrip("/") + sig.path, headers=auth_headers(cfg)))
        except httpx.HTTPError:
            return None  # nothing there (or a failure the reachability check reports)
        if said:
            return name, said
    return None


def detect_sync(client: httpx.Client, url: str) -> str | None:
    """The kind whose signature the server at `url` answers, or None."""
    for name, sig in signatures():
        try:
            if _judge(sig, client.get(url.rstrip("/") + sig.path)):
                return name
        except httpx.HTTPError:
            return None
    return None


def guess_sync(client: httpx.Client, url: str) -> str:
    """The kind a bare URL most likely is: the one whose signature it answers, else the first
    whose `guess_path` answers 200, else the generic kind (any OpenAI-compatible server)."""
    found = detect_sync(client, url)
    if found:
        return found
    for name in registry.names():
        path = registry.get(name).guess_path
        if not path:
            continue
        try:
            if client.get(url.rstrip("/") + path).status_code == 200:
                return name
        except httpx.HTTPError:
            continue
    return next(name for name in registry.names() if registry.get(name).generic)
