"""Ghost text: what the editor asks for, handed to the buffer's session.

Everything here runs on the worker's asyncio loop (see nvim/worker.py); the editor is reached
only through the `Editor` port, whose Neovim implementation hops to pynvim's thread. Each
suggestion is one or two `Pipeline.complete()` calls (pipeline/complete.py), run by the
buffer's `Session` (ghost/session.py: latest wins, first part and continuation, eager stepping,
speculation). The engine holds the sessions, one per buffer, and what they share (built once
per host); it checks that a snapshot may be answered (a backend configured, the privacy
policy) before its session sees it, and keeps what is not one buffer's: accepts, and the rest
of a suggestion the user typed through.
"""

from __future__ import annotations

import asyncio

from ..config import Config
from ..pipeline.complete import Pipeline
from ..privacy.gate import Gate
from ..snapshot import Snapshot
from ..stats import Stats
from ..updates import Editor, Render
from . import session as _session
from .render import accepted_snapshot, plan
from .session import Session, Shared

__all__ = ["Editor", "Engine", "accepted_snapshot", "plan"]


class Engine:
    ALTERNATIVES = _session.ALTERNATIVES
    ALT_TEMPERATURE = _session.ALT_TEMPERATURE
    PARTIAL_FRAME_S = _session.PARTIAL_FRAME_S
    WHOLE_ANSWER_S = _session.WHOLE_ANSWER_S
    SPECULATE_UNACCEPTED = _session.SPECULATE_UNACCEPTED
    FIRST = _session.FIRST
    SPECULATIVE = _session.SPECULATIVE

    def __init__(self, editor: Editor, pipeline: Pipeline, stats: Stats, privacy: Gate) -> None:
        self.editor = editor
        self.pipeline = pipeline
        self.stats = stats
        self.privacy = privacy
        self.shared = Shared(editor, pipeline, stats, privacy)
        # each buffer's session, made on first use (every request kind keeps its tasks there)
        self.sessions: dict[int, Session] = {}

    @property
    def config(self) -> Config | None:
        return self.pipeline.config

    def session(self, buf: int) -> Session:
        """`buf`'s session, made on first use."""
        session = self.sessions.get(buf)
        if session is None:
            session = self.sessions[buf] = Session(buf, self.shared)
        return session

    def _ready(self, snap: Snapshot) -> bool:
        return self.pipeline.backend is not None and self.pipeline.config is not None and not self.privacy.refuses(snap)

    # -- what the editor asks for ----------------------------------------------------------

    def submit(self, snap: Snapshot) -> None:
        """A new snapshot for a buffer: its session cancels what is in flight there and starts anew."""
        pipeline = self.pipeline
        if pipeline.backend is None or pipeline.config is None or self.privacy.refuses(snap):
            self.cancel(snap.buf)
            return
        session = self.sessions.get(snap.buf) or self.session(snap.buf)
        session.key(snap)

    def warm(self, snap: Snapshot) -> asyncio.Task[None] | None:
        """The cursor rests at a new place (Normal mode): have the server evaluate the prompt
        for it with nothing to generate, so the first key typed there finds it cached (on a
        CPU a cold prompt is most of a suggestion's time). Only where the backend can
        (`warms`); never while a real request for the buffer is in flight, and a newer
        warm-up replaces an older one (Session.warm_up). Returns the warm-up's task, None when
        there is none."""
        backend = self.pipeline.backend
        if backend is None or not backend.warms or not self._ready(snap):
            return None
        return self.session(snap.buf).warm_up(snap)

    def alternatives(self, snap: Snapshot) -> None:
        """Fetch more candidates for the spot of `snap` (next/prev when only one is known)."""
        self.cancel(snap.buf)
        if not self._ready(snap):
            return
        self.session(snap.buf).alternatives(snap)

    def cancel(self, buf: int) -> bool:
        """Stop what a keystroke makes stale in `buf`; True when a live request was cancelled."""
        session = self.sessions.get(buf)
        return session is not None and session.abort()

    def forget(self, buf: int) -> None:
        """The buffer is gone: its session stops everything and drops what is kept for it."""
        session = self.sessions.pop(buf, None)
        (session or Session(buf, self.shared)).forget()

    def cancel_all(self) -> None:
        """What a keystroke makes stale and the warm-ups, in every buffer (new options, or none)."""
        for session in list(self.sessions.values()):
            session.abort()
            session.cancel("warm")

    def note_accept(self, kind: str) -> None:
        self.stats.count(f"accepts_{kind}")
        self.shared.unaccepted = 0

    def note_typed_through(self, snap: Snapshot, text: str) -> None:
        """The user typed part of the shown suggestion; the rest is the answer for this spot,
        once post-processed again for the line as it is now (a rest that only repeats the line
        above, or a closer the typed text made a duplicate, is not kept)."""
        self.stats.count("typed_through")
        self.shared.unaccepted = 0
        if self.config is None or not text:
            return
        checked = self.pipeline.recheck(snap, text)
        if checked != text:
            if not checked:
                self.stats.count("quiet")
            self.editor.update(Render(plan=plan(snap, [checked], final=True)))
