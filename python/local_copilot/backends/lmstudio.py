"""LM Studio's server (`lms server start`): its OpenAI-compatible `/v1/completions`, the FIM
prompt rendered here from the template registry as for vLLM; instruction edits use its
`/v1/chat/completions`.

Only LM Studio answers `/api/v0/models`: every model it has, each with its `type` ('llm',
'vlm', 'embeddings'), its `state` ('loaded' or 'not-loaded') and `max_context_length`. That
tells it apart from other servers (detect.py) and says which model runs: the configured one
(LM Studio loads a model named in a request when it is not loaded yet), else the first one
loaded. The context per request is `loaded_context_length` where LM Studio reports it (a model
runs with the context it was loaded with, often less than its maximum), else unknown.

`lms server start` hands the server to LM Studio and returns: the recipe is `detached`, the
supervisor runs the command to its end, then waits for the server, which stays LM Studio's
(`lms server stop` stops it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import msgspec

from ..errors import ServerStartError
from . import registry
from .chat import ChatBackend
from .openai import OpenAIBackend
from .probe import ModelInfo, choose_model

__all__ = ["LMStudioBackend", "lmstudio_recipe", "served_models"]

DEFAULT_PORT = 1234
INSTALL_HINT = "install LM Studio (https://lmstudio.ai), run it once, then `lms` is in ~/.lmstudio/bin"
GENERATES = ("llm", "vlm")


class _Model(msgspec.Struct):
    id: str
    type: str = "llm"
    state: str = ""
    max_context_length: int | None = None
    loaded_context_length: int | None = None


class _Models(msgspec.Struct):
    data: list[_Model] = []


_decoder = msgspec.json.Decoder(_Models)


def served_models(doc: Any) -> list[_Model]:
    return msgspec.convert(doc, _Models).data


class LMStudioBackend(OpenAIBackend):
    supports_n = False  # one choice per request: alternatives are asked for one by one

    @staticmethod
    def context_advice(backend: str, need: int, slots: int) -> list[str]:
        return [f"load the model with a larger context (lms load MODEL --context-length {-(-need // 1024) * 1024})"]

    async def probe(self) -> ModelInfo:
        models = [m for m in (await self.fetch("GET", "/api/v0/models", _decoder)).data if m.type in GENERATES]
        chosen = choose_model(self, models, next((m for m in models if m.state == "loaded"), None),
                              unknown="LM Studio has no model {wanted} (it has: {ids}); `lms get` downloads one",
                              no_default=f"LM Studio has no model loaded; load one (`lms load MODEL`) or set "
                                         f"backends.{self.name}.model (LM Studio then loads it on the first request)")
        n_ctx = chosen.loaded_context_length if chosen.state == "loaded" else None
        return ModelInfo(id=chosen.id, owned_by="lmstudio", n_ctx=n_ctx, path=chosen.id)


def _says(doc: Any) -> str | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        return None
    try:
        models = served_models(doc)
    except msgspec.ValidationError:
        return None
    if not all(isinstance(m, dict) and "state" in m for m in doc["data"]):
        return None
    loaded = [m.id for m in models if m.state == "loaded" and m.type in GENERATES]
    return "LM Studio, " + (f"loaded: {', '.join(loaded)}" if loaded else f"{len(models)} model(s), none loaded")


def find_lms(path: str = "") -> str | None:
    """`lms` on `path` (this process's PATH when ''), else where LM Studio installs it
    (~/.lmstudio/bin/lms)."""
    found = shutil.which("lms", path=path or None)
    if found:
        return found
    home = Path.home() / ".lmstudio" / "bin" / "lms"
    return str(home) if os.access(home, os.X_OK) else None


def lmstudio_recipe(name: str, cfg: Any, opts: Any, port: int, facts: Any) -> Any:
    """`lms server start --port P`: LM Studio's server binds 127.0.0.1 unless told otherwise."""
    from .launch import Recipe

    lms = find_lms(opts.env.get("PATH") or facts.path)
    if lms is None:
        raise ServerStartError(f"{name}: lms (LM Studio's command) not found; {INSTALL_HINT}")
    return Recipe(backend=name, kind="lmstudio", argv=[lms, "server", "start", "--port", str(port), *opts.extra_args],
                  env=dict(opts.env), port=port, url=f"http://127.0.0.1:{port}", health_path="/v1/models",
                  startup_timeout_s=opts.startup_timeout_s or 120.0, model=cfg.model, detached=True,
                  notes=["LM Studio runs the server: `lms server stop` stops it"])


registry.register(registry.Kind(
    name="lmstudio", dialect=LMStudioBackend, default_url=f"http://127.0.0.1:{DEFAULT_PORT}", ready_path="/v1/models",
    recipe="lmstudio", launch=lmstudio_recipe, manual=lambda model, port: f"lms server start --port {port}",
    signature=registry.Signature("/api/v0/models", _says), builtin=True, chat=ChatBackend))
