"""`:checkhealth` on instruction edits: which backend entry answers them, whether its chat
endpoint answers a short question, and whether its model looks like an instruct model (a
FIM base model writes poor edits)."""

from __future__ import annotations

import asyncio
import re
import time

import httpx

from ..config import Config
from ..errors import BackendError, ConfigError, ServerUnavailable
from ..instruct.chat import chat_backend
from .checks import Item

__all__ = ["edit_items"]

# names instruct and chat models carry (Qwen2.5-Coder-7B-Instruct, gemma-2-9b-it, ...:chat)
_INSTRUCT = re.compile(r"instruct|chat|[-_.:]it\b|[-_]it[-_.]|coder:\d+(\.\d+)?b$", re.I)
PROBE = [{"role": "user", "content": "Reply with the single word: ok"}]


async def edit_items(cfg: Config, client: httpx.AsyncClient, timeout: float) -> list[Item]:
    name = cfg.edit.backend or cfg.backend
    bcfg = cfg.backends[name]
    where = f"edits use backend {name} ({bcfg.kind} at {bcfg.url})"
    try:
        chat = chat_backend(name, bcfg, client, timeout_s=timeout)
    except ConfigError as exc:
        return [Item(level="error", message=str(exc))]
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            await chat.context_limit()
            exchange = await chat.chat(PROBE, 4, 0.0)
            async for _ in exchange.chunks():
                pass
    except ServerUnavailable as exc:
        return [Item(level="warn", message=f"{where}: not answering ({exc})",
                     advice=["start it (:LocalCopilotBackend NAME) or set edit.backend to a running one"])]
    except (BackendError, ConfigError, TimeoutError) as exc:
        return [Item(level="error", message=f"{where}: its chat endpoint {chat.path} failed: {exc or 'no answer in time'}",
                     advice=["a llama-server model needs a chat template (most instruct GGUFs carry one)"])]
    except Exception as exc:  # a bug here must not cost the rest of the report
        return [Item(level="error", message=f"the check itself failed: {exc.__class__.__name__}: {exc}",
                     advice=["please report this; :LocalCopilot log has details"])]
    finally:
        chat.close()
    ms = (time.perf_counter() - started) * 1000
    items = [Item(level="ok", message=f"{where}: {chat.path} answered in {ms:.0f} ms"
                  + (f" (model {chat.served})" if chat.served else ""))]
    if chat.served and not _INSTRUCT.search(chat.served):
        items.append(Item(level="warn", message=f"edits use model {chat.served}, which looks like a base (FIM) model: "
                          "its edits will be poor", advice=[
                              "give edits an instruct model: a backends entry for it and edit.backend = its name "
                              "(:help local-copilot-edit)"]))
    return items
