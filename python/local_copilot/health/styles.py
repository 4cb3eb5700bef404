"""What :checkhealth and `local-copilot doctor` say of a backend's prompt style
(prompt/styles.py): which style is in use and why, and the probe's answer as the editor would
show it in that style."""

from __future__ import annotations

from typing import Any

from ..backend_config import BackendConfig
from ..backends.base import FimRequest
from ..pipeline.postprocess import PostContext, process
from .checks import Item

__all__ = ["probe_shown", "style_item"]

_WHAT = {
    "fim": "fill-in-the-middle in the model's own FIM tokens",
    "continue": "the text before the cursor, continued (a base model; what it repeats of the text after "
                "the cursor is cut)",
    "chat": "a hole-filling chat prompt (an instruct model; fences, prose and turn tokens are cut from its answer)",
}


def style_item(name: str, bcfg: BackendConfig, backend: Any) -> Item:
    """The style in use and the reason; a style other than FIM comes with what would do better."""
    style = getattr(backend, "style", "fim")
    reason = getattr(backend, "style_reason", "")
    message = f"prompt style: {style}" + (f" ({reason})" if reason else "")
    if style == "fim":
        return Item(level="ok", message=message)
    advice = [f"{style}: {_WHAT[style]}",
              "a coder model with FIM tokens (e.g. Qwen2.5-Coder, base) fills the middle better"]
    if not bcfg.prompt:
        other = "chat" if style == "continue" else "continue"
        advice.append(f"the style is detected; set backends[{name!r}].prompt = {other!r} (or 'fim') to choose")
    return Item(level="info", message=message, advice=advice)


def probe_shown(backend: Any, probe: FimRequest, raw: str) -> str:
    """The probe's raw answer as ghost text in the backend's style: a continue or chat answer
    is judged on what the editor shows (its repeats of the text after the cursor and a chat
    answer's wrappers cut), a FIM answer as the model wrote it."""
    style = getattr(backend, "style", "fim")
    if style == "fim":
        return raw
    lines_after = probe.suffix.split("\n")
    ctx = PostContext(line_prefix=probe.middle, line_suffix=lines_after[0], next_lines=tuple(lines_after[1:]),
                      prev_lines=tuple(probe.prefix.split("\n")[:-1]), stop_strings=tuple(backend.stop_strings),
                      chat=style == "chat")
    return process(raw, ctx, final=True).text
