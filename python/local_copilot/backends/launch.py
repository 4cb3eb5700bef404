"""What starting a server gives: the `Recipe` (argv, environment, port, readiness path) that
servers/ runs and supervises. A kind with a launcher of its own (`Kind.launch`: SGLang, LM
Studio) returns one; servers/recipes.py builds the others. Here, below both, so that a kind's
launcher needs nothing from servers/."""

from __future__ import annotations

import msgspec

__all__ = ["LOOPBACK", "Recipe", "keep_loopback"]

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class Recipe(msgspec.Struct, frozen=True, kw_only=True):
    backend: str  # the user's name for it ("llama.cpp", "vllm", "lab", ...)
    kind: str  # which recipe: llama.cpp | vllm | ollama | custom (a user cmd with no known recipe)
    argv: list[str]
    env: dict[str, str] = {}  # added to the environment of the server
    port: int
    url: str  # always loopback
    health_path: str = "/health"
    startup_timeout_s: float = 300.0
    model: str = ""  # what must be present (Ollama check)
    notes: list[str] = []  # one-line explanations for the user (sizing, defaults chosen)
    # the command hands the server to a daemon of its own and returns (`lms server start`):
    # it is run to its end, then the server is waited for; it is not the plugin's to supervise
    detached: bool = False




def keep_loopback(name: str, extra: list[str] | tuple[str, ...]) -> tuple[list[str], list[str]]:
    """`extra` without arguments that would bind the server elsewhere than 127.0.0.1, and a
    note for each one dropped: servers the plugin starts listen on this machine only (a
    command in backends.NAME.cmd binds where it says)."""
    out: list[str] = []
    notes: list[str] = []
    args = list(extra)
    i = 0
    while i < len(args):
        arg = args[i]
        key, eq, value = arg.partition("=")
        if key == "--host":
            if not eq:
                value = args[i + 1] if i + 1 < len(args) else ""
                i += 1
            if value not in LOOPBACK:
                notes.append(f"WARNING: backends.{name}.server.extra_args asks to bind {value or '?'}: ignored, the "
                             f"server listens on 127.0.0.1 only (set backends.{name}.cmd to bind elsewhere)")
            i += 1
            continue
        out.append(arg)
        i += 1
    return out, notes
