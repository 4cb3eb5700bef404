"""One completion outside Neovim (`local-copilot complete`): a file, a cursor, the pipeline.

The completion pipeline the editor's ghost text awaits (pipeline/complete.py) runs once on a
snapshot built from the file, so the privacy policy, the prompt, the window fit, the template
and the post-processing are the editor's; its completion is the answer. Nothing is started: the
backend must be running.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from ..config import load_config
from ..core import Core
from ..errors import BackendError, ConfigError, PrivateText
from ..line_ends import split_lines
from ..log import setup_logging
from ..pipeline.complete import Ask
from ..prompt.budget import utf8_len
from ..snapshot import Snapshot
from ..updates import Notice, PrivacyVerdict, Update

__all__ = ["Answer", "complete_text", "cursor_at"]


class Answer:
    """The suggestion the editor would show at the cursor ("" when the model had none)."""

    __slots__ = ("backend", "context", "seconds", "text")

    def __init__(self, text: str, seconds: float, backend: str, window: dict[str, int | None] | None = None,
                 sources: tuple[tuple[str, str], ...] = ()) -> None:
        self.text, self.seconds, self.backend = text, seconds, backend
        # what the prompt held: the window around the cursor, then each other source by file
        self.context: list[dict[str, Any]] = [
            {"source": "window", "lines_before": (window or {}).get("lines_before"),
             "tokens": (window or {}).get("window_tokens")},
            *({"source": source, "file": name} for source, name in sources)]


def cursor_at(lines: list[str], line: int | None, col: int | None) -> tuple[int, int]:
    """0-based row and byte column for a 1-based LINE and COL (COL as Neovim counts it: bytes,
    and one past the last byte is the end of the line); by default the end of the last line.
    A COL inside a character of several bytes is that character's start, as Neovim puts the
    cursor there (the engine takes a byte column on a character's boundary)."""
    row = len(lines) - 1 if line is None else line - 1
    if not 0 <= row < len(lines):
        raise ConfigError(f"line {line} is not in the file (it has {len(lines)} lines)")
    size = utf8_len(lines[row])
    byte = size if col is None else col - 1
    if not 0 <= byte <= size:
        raise ConfigError(f"column {col} is not on line {row + 1} (it has {size} bytes; {size + 1} is its end)")
    return row, _char_start(lines[row], byte)


def _char_start(line: str, byte: int) -> int:
    """The byte column of the start of the character holding byte `byte` of `line`."""
    if line.isascii():
        return byte
    start = 0
    for ch in line:
        end = start + utf8_len(ch)
        if end > byte:
            return start
        start = end
    return start


class _Quiet:
    """The editor port of a one-shot completion: it draws nothing and keeps why the privacy
    policy refused the text, or the first failure said (the answer's own error comes first)."""

    def __init__(self) -> None:
        self.failure = ""
        self.refused = ""

    def update(self, u: Update) -> None:
        if isinstance(u, Notice):
            if u.level in ("error", "warn") and not self.failure:
                self.failure = u.message
        elif isinstance(u, PrivacyVerdict) and u.reason is not None:
            self.refused = f"not sent: {u.path or 'the text'} is private: {u.reason}"


async def _complete(raw: dict[str, Any], snap: Snapshot) -> Answer:
    cfg = load_config(raw)
    setup_logging(cfg.log_level)  # the pipeline's warnings to the plugin's log, as in the editor; the error to stderr
    editor = _Quiet()
    core = Core(editor)
    core.configure(cfg)
    pipeline = core.pipeline
    t0 = time.monotonic()
    try:
        if core.privacy.refuses(snap):
            raise PrivateText(editor.refused)
        # the pipeline has its own per-request timeouts; this only bounds a probe plus requests
        limit = 2 * cfg.active.timeout_ms / 1000 + 5
        async with asyncio.timeout(limit):
            # the imported files' signatures are read now: the editor's keys read them off
            # their path and use them from the next key on, and this is the only one
            await asyncio.to_thread(core.prompts.imports.now, snap.path, snap.ft, core.prompts.ring.policy)
            backend = pipeline.backend
            if backend is not None and backend.warms:
                # the editor sizes its window from the server's measured speed, and this one has
                # measured nothing: a warm-up (the prompt, nothing generated) measures it first,
                # so the answer is the one a warmed-up editor shows (the whole window from a GPU,
                # not a CPU's assumed share of it); the prompt is then cached
                await pipeline.complete(snap, Ask(n_predict=0, cached=False, quiet=True))
            out = await pipeline.complete(snap)
    except TimeoutError:
        raise BackendError(f"{cfg.backend}: no suggestion within {limit:g} s") from None
    finally:
        await core.close()
    if out.error is not None:
        if isinstance(out.error, BackendError):  # its kind tells the CLI what to hint
            raise out.error
        raise BackendError(editor.failure.removeprefix("local-copilot: ") or f"{cfg.backend}: {out.error}")
    return Answer(out.text, time.monotonic() - t0, cfg.backend, core.prompts.in_use, core.prompts.sources)


def complete_text(raw: dict[str, Any], text: str, *, path: str = "", line: int | None = None,
                  col: int | None = None) -> Answer:
    """The suggestion for `text` (a file's contents) at LINE:COL, from the configured backend."""
    lines = split_lines(text)  # a file's CRLF or CR line ends as a language client counts them
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the file's final newline ends its last line, as in Neovim
    row, byte = cursor_at(lines, line, col)
    snap = Snapshot(buf=1, tick=1, row=row, col=byte, first=0, lines=lines, nlines=len(lines),
                    # absolute, its links not followed: the privacy policy judges the name given and
                    # where it resolves (a link named notes.py may be ~/.ssh/config, or .env an ordinary file)
                    path=os.path.abspath(path) if path else "", seq=1)  # no filetype: the engine reads none
    return asyncio.run(_complete(raw, snap))
