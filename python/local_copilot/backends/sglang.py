"""SGLang (`python -m sglang.launch_server`): its OpenAI-compatible `/v1/completions`, the
FIM prompt rendered here from the template registry as for vLLM; instruction edits use its
`/v1/chat/completions`.

Only SGLang answers `/get_model_info` (`{"model_path", "tokenizer_path", "is_generation", ...}`)
and `/health_generate` (200 once a one-token generation ran): the first tells it apart from
other OpenAI-compatible servers (detect.py, :checkhealth, the bench). `/health` answers once it
takes requests. Its built-in entry is `sglang` at 127.0.0.1:30000, SGLang's default port, and
`server.recipe = 'sglang'` starts one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

from ..errors import ServerStartError
from ..prompt.templates import FimTemplate
from . import registry
from .base import FimRequest, Wire
from .chat import ChatBackend
from .openai import OpenAIBackend

__all__ = ["SGLangBackend", "sglang_argv", "sglang_recipe"]

DEFAULT_PORT = 30000
INSTALL_HINT = "pip install 'sglang[all]' (in a venv; then set server.python to its python)"
_HAS_SGLANG = "import importlib.util as u, sys; sys.exit(0 if u.find_spec('sglang') else 1)"


class SGLangBackend(OpenAIBackend):
    def body(self, req: FimRequest, template: FimTemplate) -> dict[str, Any]:
        body = super().body(req, template)
        # SGLang drops special tokens from the text by default, so a stop string naming one
        # (the template's end tokens) would never match: keep them, as for vLLM
        body["skip_special_tokens"] = False
        return body

    @staticmethod
    def context_advice(backend: str, need: int, slots: int) -> list[str]:
        return [f"start SGLang with a larger context (--context-length {-(-need // 1024) * 1024})"]

    async def raw_wire(self, prompt: str, n_predict: int, stop: tuple[str, ...]) -> Wire:
        wire = await super().raw_wire(prompt, n_predict, stop)
        wire.body["skip_special_tokens"] = False  # the stop strings name special tokens
        return wire


def _says(doc: Any) -> str | None:
    if isinstance(doc, dict) and isinstance(doc.get("model_path"), str) and "is_generation" in doc:
        return f"SGLang serving {doc['model_path']}"
    return None


def _python_with_sglang(python: str, path: str) -> str | None:
    """The python that runs SGLang: server.python, else this one, else python3 on `path`."""
    for exe in ([shutil.which(python, path=path or None) or python] if python
                else [sys.executable, shutil.which("python3", path=path or None) or ""]):
        if not exe or not os.path.exists(exe):
            continue
        try:
            ok = subprocess.run([exe, "-c", _HAS_SGLANG], capture_output=True, timeout=30, check=False).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return exe
    return None


def sglang_argv(python: str, *, model: str, port: int, served_model_name: str = "",
                extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    argv = [python, "-m", "sglang.launch_server", "--model-path", model, "--port", str(port), "--host", "127.0.0.1"]
    if served_model_name and served_model_name != model:
        argv += ["--served-model-name", served_model_name]
    return [*argv, *extra]


def _manual(model: str, port: int) -> str:
    return f"python -m sglang.launch_server --model-path {model or 'MODEL'} --port {port}"


def sglang_recipe(name: str, cfg: Any, opts: Any, port: int, facts: Any) -> Any:
    """The launch recipe of an SGLang entry (servers/recipes.py runs it)."""
    from .launch import Recipe, keep_loopback

    model = opts.weights or cfg.model
    if not model:
        raise ServerStartError(f"{name}: no model to serve; set backends.{name}.model to a Hugging Face id or a "
                               "model directory (e.g. Qwen/Qwen2.5-Coder-1.5B)")
    python = _python_with_sglang(opts.python, facts.path)
    if python is None:
        where = f" in {opts.python}" if opts.python else ""
        raise ServerStartError(f"{name}: SGLang is not installed{where}; install it: {INSTALL_HINT}")
    extra, notes = keep_loopback(name, opts.extra_args)
    argv = sglang_argv(python, model=model, port=port, served_model_name=cfg.model, extra=extra)
    return Recipe(backend=name, kind="sglang", argv=argv, env=dict(opts.env), port=port, url=f"http://127.0.0.1:{port}",
                  health_path="/health", startup_timeout_s=opts.startup_timeout_s or 600.0, model=cfg.model or model,
                  notes=notes)


registry.register(registry.Kind(
    name="sglang", dialect=SGLangBackend, default_url=f"http://127.0.0.1:{DEFAULT_PORT}", ready_path="/health",
    recipe="sglang", launch=sglang_recipe, manual=_manual, signature=registry.Signature("/get_model_info", _says),
    builtin=True, chat=ChatBackend))
