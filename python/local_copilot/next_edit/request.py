"""Next-edit requests: one per buffer at a time (latest wins), on the raw completion endpoint
of the next-edit backend, answered by one edit for the editor to show.

The request goes to `next_edit.backend` when it names another backend entry (a small FIM
model and a next-edit model side by side), else to the ghost-text backend. The answer is
capped by size (`n_predict` tokens, MAX_ANSWER_CHARS characters), never by time: a rewrite
cut short is not an edit, so a cut answer shows nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Callable
from contextlib import aclosing
from typing import Any, cast

import httpx

from ..backends import make_backend
from ..backends.base import HttpBackend
from ..config import Config, NextEditConfig
from ..errors import BackendError, ConfigError, ModelLoading, ServerHeld
from ..ghost.session import Session
from ..indentation import IndentStyle, buffer_style, restyle_lines
from ..log import log
from ..notify import Episodes
from ..privacy.gate import Gate
from ..prompt.long_lines import cut_lines
from ..snapshot import Snapshot
from ..stats import Stats
from ..transport.exchange import Exchange
from ..updates import Editor, NextEditPlan, notices
from .edit import Edit, edit_between
from .formats import FORMATS, EditContext, Format, Prompt, detect
from .history import EditEvent, History

__all__ = ["NextEdits", "Outcome", "ask", "detect_format"]

MAX_ANSWER_CHARS = 16_384


class Outcome:
    """What one request came to (checkhealth shows it)."""

    def __init__(self, prompt: Prompt, answer: str, edit: Edit | None, why: str) -> None:
        self.prompt, self.answer, self.edit, self.why = prompt, answer, edit, why


class NextEdits:
    def __init__(self, editor: Editor, stats: Stats, privacy: Gate,
                 state: Callable[[int], Session], episodes: Episodes | None = None) -> None:
        self.editor = editor
        self.stats = stats
        self.privacy = privacy
        self._state = state
        self.cfg = NextEditConfig()
        self.history = History()
        self.backend: HttpBackend | None = None
        self._own: HttpBackend | None = None  # a backend of its own (next_edit.backend)
        self._format: Format | None = None
        # failure messages: the backend's episode, shared with ghost text where it is the same server
        self.episodes = episodes if episodes is not None else Episodes(notices(editor))
        self.notifier = self.episodes.of("")

    # -- configuration -----------------------------------------------------------------

    def configure(self, cfg: Config, shared: Any, client: httpx.AsyncClient) -> None:
        self.cfg = cfg.next_edit
        self.history.max_events = self.cfg.history_events
        self.history.max_bytes = self.cfg.history_bytes
        self.history.max_age_s = self.cfg.history_minutes * 60.0
        if not self.cfg.enabled:  # turned off: what the user typed is not kept for later
            self.history.clear()
        if self._own is not None:
            self._own.close()
            self._own = None
        name = self.cfg.backend or cfg.backend
        self.notifier = self.episodes.of(name)
        if name == cfg.backend:
            self.backend = cast(HttpBackend, shared)
        else:
            self._own = cast(HttpBackend, make_backend(name, cfg.backends[name], client))
            self.backend = self._own
        self._format = FORMATS[self.cfg.format] if self.cfg.format else None

    def close(self) -> None:
        if self._own is not None:
            self._own.close()

    # -- the edit history ----------------------------------------------------------------

    def _refused(self, path: str) -> bool:
        return self.privacy.policy.path_reason(path) is not None or self.privacy.refuses_file(path)

    def record(self, path: str, row: int, old: list[str], new: list[str], before: list[str] | None = None,
               after: list[str] | None = None) -> None:
        """A change the user made, in any buffer (the editor sends those since the last request
        with each request). A file the privacy policy refuses, by name or by what the change
        holds, is never kept, and a refused change drops the file's earlier ones too."""
        policy = self.privacy.policy
        if self._refused(path) or any(policy.text_reason(part) for part in (new, old, before or [], after or [])):
            self.history.forget_path(path)
            return
        # long lines enter the history cut, as every prompt's lines (prompt/long_lines.py)
        self.history.record(path, row, list(cut_lines(old)), list(cut_lines(new)), list(cut_lines(before or [])),
                            list(cut_lines(after or [])))

    # -- requests --------------------------------------------------------------------------

    def request(self, snap: Snapshot, cwd: str = "") -> None:
        """Ask for the next edit around `snap`'s cursor; a request before it for this buffer
        is cancelled (its stream closed, so the server stops)."""
        state = self._state(snap.buf)
        state.cancel("next_edit")
        if not self.cfg.enabled or self.backend is None or self.privacy.refuses(snap):
            return
        self.stats.count("next_edit_requests")
        state.next_edit = asyncio.get_running_loop().create_task(self._run(snap, cwd))

    async def _run(self, snap: Snapshot, cwd: str) -> None:
        started = time.monotonic()
        try:
            outcome = await self.ask(snap, cwd)
        except (ServerHeld, ModelLoading) as exc:
            # nothing sent: the server asked to wait (said once already), or it loads the
            # entry's model (router mode; the next change asks again)
            log.debug("next edit: %s", exc)
            return
        except (BackendError, ConfigError) as exc:
            self.stats.count("next_edit_failed")
            self.notifier.failure(type(exc).__name__, f"local-copilot: next edit: {exc}")
            log.info("next edit failed: %s", exc)
            return
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug here must not end the worker loop's other work, nor reach the editor
            self.stats.count("next_edit_failed")
            log.exception("next edit: internal error")
            self.notifier.failure("internal", "local-copilot: next edit: internal error; :LocalCopilot log has details")
            return
        self.notifier.success()
        self.stats.next_edit_latency(time.monotonic() - started)
        edit = outcome.edit
        if edit is None:
            self.stats.count("next_edit_quiet")
            log.debug("next edit: nothing to show (%s)", outcome.why)
            return
        self.editor.update(NextEditPlan(
            buf=snap.buf, tick=snap.tick, seq=snap.seq, cursor=[snap.row, snap.col],
            row=edit.row, col=edit.col, end_row=edit.end_row, end_col=edit.end_col, text=edit.text, old=edit.old,
        ))

    @property
    def format_name(self) -> str:
        """The format in use, once known ('' before the first request detects it)."""
        return self._format.name if self._format is not None else ""

    async def format(self) -> Format:
        """The configured format, else the one the served model speaks (asked once)."""
        if self._format is None:
            assert self.backend is not None
            self._format = await detect_format(self.backend)
        return self._format

    async def ask(self, snap: Snapshot, cwd: str = "") -> Outcome:
        """One request for `snap`, with the history. Files are named relative to `cwd` (the
        editor's working directory) where they are below it, as in the repositories the models
        were trained on."""
        assert self.backend is not None
        fmt = await self.format()
        # long lines are cut in the prompt (prompt/long_lines.py); the region the model
        # rewrites must hold none of them (ask())
        lines = cut_lines(snap.lines)
        cut = frozenset(snap.first + i for i, (was, now) in enumerate(zip(snap.lines, lines)) if was is not now)
        ctx = EditContext(path=_relative(snap.path, cwd) or "untitled", lines=tuple(lines), first=snap.first,
                          row=snap.row, col=snap.col)
        events = [dataclasses.replace(e, path=_relative(e.path, cwd)) for e in self.history.events(exclude=self._refused)]
        style = buffer_style(snap.lines, expandtab=snap.et, shiftwidth=snap.sw, tabstop=snap.ts)
        return await ask(self.backend, fmt, ctx, events, self.cfg.n_predict, style, cut_rows=cut)

    def note(self, what: str) -> None:
        """The editor showed, accepted or dismissed a next edit."""
        self.stats.count(f"next_edit_{what}")


def _relative(path: str, cwd: str) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return os.path.relpath(path, cwd)
    return path


async def detect_format(backend: HttpBackend) -> Format:
    """The format the served model speaks, from its name and vocabulary (formats.detect)."""
    model = await backend.served_model()
    markers = tuple(sorted({m for f in FORMATS.values() for m in f.markers}))
    name = detect(model, await backend.single_tokens(markers))
    if name is None:
        raise ConfigError(f"cannot tell the next-edit format of {model or 'the served model'!r}; "
                          f"set next_edit.format to one of: {', '.join(FORMATS)}")
    return FORMATS[name]


async def ask(backend: HttpBackend, fmt: Format, ctx: EditContext, events: list[EditEvent], n_predict: int,
              style: IndentStyle | None = None, *, cut_rows: frozenset[int] = frozenset()) -> Outcome:
    """One request, start to end: the prompt, the answer, the edit (None: nothing to show). The
    lines the model wrote anew are indented in the buffer's `style` (indentation.py).
    `cut_rows`: rows whose lines the prompt holds cut (long ones): a region with one is not
    asked about (its rewrite would replace the whole line with what the model saw of it)."""
    prompt = fmt.build(ctx, events)
    if any(prompt.start <= row < prompt.end for row in cut_rows):
        return Outcome(prompt, "", None, "a line in the region is too long to rewrite")
    wire = await backend.raw_wire(prompt.text, n_predict, prompt.stop)
    exchange = Exchange(backend.link(), wire)
    parts: list[str] = []
    size, predicted, cut, ended = 0, 0.0, False, False
    async with aclosing(exchange.chunks()) as chunks:
        async for chunk in chunks:
            parts.append(chunk.text)
            size += len(chunk.text)
            if chunk.timings:
                predicted = chunk.timings.get("predicted_n", predicted)
            if size > MAX_ANSWER_CHARS:
                cut = True
                break
            if chunk.done:
                ended = True
                break
    answer = "".join(parts)
    if cut or predicted >= n_predict:
        return Outcome(prompt, answer, None, "the answer reached the size cap")
    if not ended:
        # no final event: the stream was cut, and a region cut short would delete its end
        return Outcome(prompt, answer, None, "the answer was cut off")
    new = fmt.parse(answer, prompt)
    if new is None:
        return Outcome(prompt, answer, None, "no edit, or an answer that does not parse")
    edit = edit_between(prompt.start, list(prompt.old), restyle_lines(new, style, keep=prompt.old))
    return Outcome(prompt, answer, edit, "an edit" if edit else "the same text, or a rewrite beyond recognition")
