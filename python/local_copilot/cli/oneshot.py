"""One completion outside Neovim (`local-copilot complete`): a file, a cursor, the engine.

The same Engine the editor uses runs once on a snapshot built from the file, so the prompt,
the window fit, the template, the post-processing and the continuation are the editor's; the
suggestion it would draw is the answer. Nothing is started: the backend must be running.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from ..config import load_config
from ..ghost.engine import Engine
from ..errors import BackendError, ConfigError, PrivateText
from ..log import setup_logging
from ..prompt.budget import utf8_len
from ..instruct.runner import EditUpdate
from ..ghost.render import RenderPlan
from ..snapshot import Snapshot

__all__ = ["Answer", "complete_text", "cursor_at"]


class Answer:
    """The suggestion the editor would show at the cursor ("" when the model had none)."""

    __slots__ = ("backend", "seconds", "text")

    def __init__(self, text: str, seconds: float, backend: str) -> None:
        self.text, self.seconds, self.backend = text, seconds, backend


def cursor_at(lines: list[str], line: int | None, col: int | None) -> tuple[int, int]:
    """0-based row and byte column for a 1-based LINE and COL (COL as Neovim counts it: bytes,
    and one past the last byte is the end of the line); by default the end of the last line."""
    row = len(lines) - 1 if line is None else line - 1
    if not 0 <= row < len(lines):
        raise ConfigError(f"line {line} is not in the file (it has {len(lines)} lines)")
    size = utf8_len(lines[row])
    byte = size if col is None else col - 1
    if not 0 <= byte <= size:
        raise ConfigError(f"column {col} is not on line {row + 1} (it has {size} bytes; {size + 1} is its end)")
    return row, byte


class _Collector:
    """The Editor port: keeps the final plan, or why there is none."""

    def __init__(self) -> None:
        self.plan: RenderPlan | None = None
        self.failure = ""
        self.refused = ""  # why the privacy policy refused the text
        self.done = asyncio.Event()

    def show(self, plan: RenderPlan) -> None:
        if plan.final:
            self.plan = plan
            self.done.set()

    def notify(self, message: str, level: str) -> None:
        if level in ("error", "warn") and not self.failure:
            self.failure = message

    def private(self, buf: int, path: str, reason: str | None, kind: str) -> None:
        if reason is not None:
            self.refused = f"not sent: {path or 'the text'} is private: {reason}"
            self.done.set()

    def privacy_rules(self, rules: list[list[str]]) -> None:
        pass  # no editor reads buffers here

    def show_next_edit(self, plan: dict[str, Any]) -> None:
        pass  # the one-shot completion asks for no next edits

    def edit_update(self, update: EditUpdate) -> None:
        pass  # nor instruction edits

    def backend_state(self, state: str, message: str) -> None:
        if state in ("down", "held"):  # held: the server asked to wait (its Retry-After), said in a notify
            self.failure = self.failure or message
            self.done.set()


async def _complete(raw: dict[str, Any], snap: Snapshot) -> Answer:
    # one answer, nothing after it: no speculative request for the spot after an accept
    cfg = load_config({**raw, "speculative": False})
    setup_logging(cfg.log_level)  # the engine's warnings to the plugin's log, as in the editor; the error to stderr
    editor = _Collector()
    engine = Engine(editor)
    engine.configure(cfg)
    t0 = time.monotonic()
    try:
        # the editor sizes its window from the server's measured speed, and this engine has
        # measured nothing: a warm-up (the prompt, nothing generated; llama.cpp) measures it
        # first, so the answer is the one a warmed-up editor shows (the whole window from a
        # GPU, not a CPU's assumed share of it); where it came in time the prompt is cached
        warming = engine.warm(snap)
        if warming is not None:
            await asyncio.wait({warming}, timeout=cfg.active.timeout_ms / 1000)
        engine.submit(snap)
        # the engine has its own per-request timeouts; this only bounds a probe plus a request
        limit = 2 * cfg.active.timeout_ms / 1000 + 5
        try:
            await asyncio.wait_for(editor.done.wait(), limit)
        except TimeoutError:
            raise BackendError(f"{cfg.backend}: no suggestion within {limit:g} s") from None
    finally:
        await engine.close()
    if editor.plan is None:
        if editor.refused:
            raise PrivateText(editor.refused)
        failure = engine.reader.last_failure
        if isinstance(failure, BackendError):  # its kind tells the CLI what to hint
            raise failure
        raise BackendError(editor.failure.removeprefix("local-copilot: ") or f"{cfg.backend}: no answer")
    return Answer(editor.plan.text, time.monotonic() - t0, cfg.backend)


def complete_text(raw: dict[str, Any], text: str, *, path: str = "", line: int | None = None,
                  col: int | None = None) -> Answer:
    """The suggestion for `text` (a file's contents) at LINE:COL, from the configured backend."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the file's final newline ends its last line, as in Neovim
    row, byte = cursor_at(lines, line, col)
    snap = Snapshot(buf=1, tick=1, row=row, col=byte, first=0, lines=lines, nlines=len(lines),
                    # absolute, its links not followed: the privacy policy judges the name given and
                    # where it resolves (a link named notes.py may be ~/.ssh/config, or .env an ordinary file)
                    path=os.path.abspath(path) if path else "", seq=1)  # no filetype: the engine reads none
    return asyncio.run(_complete(raw, snap))
