"""What a probed server tells of itself, as :checkhealth and `local-copilot doctor` show it:
each dialect's `described()` fills one (health/backend.py reads it and names no kind)."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["Served"]


class Served(msgspec.Struct, frozen=True, kw_only=True):
    model: str  # the served model, as the report names it ("qwen2.5-coder (vllm)")
    # the model's path or id, where its files may be found (the GPU memory estimate)
    hint: str = ""
    # how the FIM prompt is built, one line at the level it is worth; None: nothing to tell
    # (another prompt style, or a dialect that does not say)
    prompt: tuple[Literal["ok", "info"], str] | None = None
    context: int | None = None  # tokens one request may use, where the server says
    slots: int = 1  # requests the server runs at once, each with `context` tokens
    # the server program behind the API, where it says ("vllm", "llamacpp"): its own pitfalls
    # (health/programs.py)
    program: str = ""
