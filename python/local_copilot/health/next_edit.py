"""checkhealth for next edits: which backend serves them, which format it speaks, and whether
its answer to a known case parses (a parameter renamed; its use below is the next edit)."""

from __future__ import annotations

import asyncio
import time

import httpx

from ..backends import make_backend
from ..backends.base import HttpBackend
from ..config import Config
from ..errors import BackendError, ConfigError
from ..log import log
from ..next_edit.formats import FORMATS, EditContext
from ..next_edit.history import EditEvent
from ..next_edit.request import ask, detect_format
from .checks import Item

__all__ = ["next_edit_items", "PROBE_CONTEXT", "PROBE_EVENTS"]

PROBE_CONTEXT = EditContext(path="calc.py", lines=("def area(width, h):", "    return w * h", "", "print(area(2, 3))"),
                            first=0, row=0, col=14)
PROBE_EVENTS = [EditEvent("calc.py", 0, ("def area(w, h):",), ("def area(width, h):",), 0.0)]


async def next_edit_items(cfg: Config, client: httpx.AsyncClient, timeout: float) -> list[Item]:
    ne = cfg.next_edit
    name = ne.backend or cfg.backend
    bcfg = cfg.backends[name]
    items = [Item(level="info", message=f"next edits use backend {name} ({bcfg.kind} at {bcfg.url})"
                  + ("" if ne.backend else ", the ghost-text one"))]
    backend = make_backend(name, bcfg, client)
    assert isinstance(backend, HttpBackend)
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            fmt = FORMATS[ne.format] if ne.format else await detect_format(backend)
            outcome = await ask(backend, fmt, PROBE_CONTEXT, PROBE_EVENTS, ne.n_predict)
    except TimeoutError:
        items.append(Item(level="warn", message=f"next-edit probe: no complete answer within {timeout:.0f}s",
                          advice=["the server is busy or slow; run the check again"]))
        return items
    except ConfigError as exc:
        items.append(Item(level="error", message=f"next-edit probe: {exc}",
                          advice=["set next_edit.format: 'sweep', 'zeta' or 'zeta2' (:help local-copilot-next-edit)"]))
        return items
    except BackendError as exc:
        items.append(Item(level="error", message=f"next-edit probe failed: {str(exc)[:300]}",
                          advice=[f"start the next-edit server (:LocalCopilotBackend start {name}) or fix its url"]))
        return items
    except Exception as exc:  # a bug here must not cost the rest of the report
        log.exception("next-edit check failed")
        items.append(Item(level="error", message=f"the check itself failed: {exc.__class__.__name__}: {exc}",
                          advice=["please report this; :LocalCopilot log has details"]))
        return items
    finally:
        backend.close()
    ms = (time.perf_counter() - started) * 1000
    origin = "configured" if ne.format else "detected"
    if outcome.edit is not None:
        items.append(Item(level="ok", message=f"next-edit probe ({fmt.name} format, {origin}): the answer parses, "
                          f"an edit at line {outcome.edit.row + 1} ({ms:.0f} ms)"))
    elif outcome.why == "the answer reached the size cap":
        items.append(Item(level="warn", message=f"next-edit probe ({fmt.name} format, {origin}): the answer did not end "
                          f"within next_edit.n_predict = {ne.n_predict} tokens ({ms:.0f} ms)",
                          advice=["is the served model a next-edit model of this format? "
                                  "(Sweep Next-Edit, Zeta, Zeta-2; see :help local-copilot-next-edit)"]))
    else:
        items.append(Item(level="warn", message=f"next-edit probe ({fmt.name} format, {origin}): no edit to show: "
                          f"{outcome.why} ({ms:.0f} ms)",
                          advice=["a next-edit model answers this case with an edit; check next_edit.format"]))
    return items
