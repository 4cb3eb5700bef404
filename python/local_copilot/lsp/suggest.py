"""The suggestions a completion request is answered with, for both language servers: the
stdio one (server.py, any editor) and Neovim's in-process one (nvim/plugin.py, lsp.lua).

One asks the pipeline as ghost text does (so a place ghost text already asked for is answered
from the cache, no second request; where ghost text has only its first part, from the same
continuation ghost text runs), and for an invoked request (the user asked for the menu)
alternatives are sampled too, up to MAX_ITEMS in all.
"""

from __future__ import annotations

from ..core import Core
from ..ghost.engine import Engine
from ..pipeline.complete import Ask
from ..snapshot import Snapshot

__all__ = ["MAX_ITEMS", "alternatives", "suggestions"]

ALTERNATIVES = Engine.ALTERNATIVES
ALT_TEMPERATURE = Engine.ALT_TEMPERATURE
MAX_ITEMS = 3


async def suggestions(core: Core, snap: Snapshot, invoked: bool, have: list[str] | None = None) -> list[str]:
    """The suggestions at `snap`'s cursor: `have` (ones still valid there), else the
    pipeline's; with alternatives when `invoked`. None for a file the privacy policy refuses
    (nothing is sent)."""
    pipeline = core.pipeline
    if core.config is None or pipeline.backend is None or core.privacy.refuses(snap):
        return []
    texts = list(have or [])
    if not texts:
        out = await pipeline.complete(snap)
        if out.continuable:
            # the cache held ghost text's first part: the rest, from the continuation ghost
            # text runs or ran (the pipeline writes it once for both)
            out = await pipeline.complete(snap, after=out)
        if out.stop == "error":
            return []  # said once per episode; alternatives would ask the same server
        if out.text:
            texts.append(out.text)
    if invoked and len(texts) < MAX_ITEMS:
        texts += await alternatives(core, snap, texts)
    return texts[:MAX_ITEMS]


async def alternatives(core: Core, snap: Snapshot, have: list[str]) -> list[str]:
    """Sampled suggestions unlike those in `have`: one request for all where the server
    writes several at once, else one request each (not kept: the cache holds the
    suggestion for the spot)."""
    backend = core.pipeline.backend
    assert backend is not None
    if backend.supports_n:
        asks = [Ask(temperature=ALT_TEMPERATURE, n=ALTERNATIVES, seed=1, cached=False)]
    else:
        asks = [Ask(temperature=ALT_TEMPERATURE, seed=i + 1, cached=False) for i in range(ALTERNATIVES)]
    found: list[str] = []
    for ask in asks:
        out = await core.pipeline.complete(snap, ask)
        if out.stop == "error" and (out.prepared is None or ask.n == 1):
            break
        found += [t for t in out.texts if t and t not in have and t not in found]
        if len(have) + len(found) >= MAX_ITEMS:
            break
    return found
