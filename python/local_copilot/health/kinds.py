"""What kind of server answers at an entry's URL, where a kind's signature tells (SGLang, LM
Studio: backends/detect.py): :checkhealth confirms it, or says which kind fits better."""

from __future__ import annotations

import httpx

from ..backend_config import BackendConfig
from ..backends import registry
from ..backends.detect import detect
from .checks import Item

__all__ = ["kind_items"]


async def kind_items(name: str, bcfg: BackendConfig, client: httpx.AsyncClient) -> list[Item]:
    """What the server says it is, where a kind's signature tells (backends/detect.py)."""
    found = await detect(client, bcfg)
    if found is None:
        sig = registry.get(bcfg.kind).signature
        return [Item(level="warn", message=f"kind {bcfg.kind!r}, but the server does not answer {sig.path} as such a "
                                           "server does", advice=[f"is backends[{name!r}].url the right server?"])
                ] if sig is not None else []
    kind, said = found
    if kind == bcfg.kind:
        return [Item(level="ok", message=f"server: {said}")]
    return [Item(level="info", message=f"the server is {said}, and backends[{name!r}] has kind {bcfg.kind!r}",
                 advice=[f"kind = {kind!r} fits it (its own probes and request fields)"])]
