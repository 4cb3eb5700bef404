"""Ghost text: when to ask the pipeline for what, and the render plans its answers become.

Everything here runs on the worker's asyncio loop (see nvim/worker.py); the editor is reached
only through the `Editor` port, whose Neovim implementation hops to pynvim's thread. Each
suggestion is one or two `Pipeline.complete()` calls (pipeline/complete.py); this module is the
strategy around them:

- Latest wins per buffer: a new snapshot cancels what is in flight there, except a request the
  server has not answered yet, which the snapshot waits behind (see `submit`).
- First part and continuation: right after a keystroke only the first `n_predict_first` tokens
  are asked for: they are on screen within milliseconds, and while the user keeps typing each
  keystroke's request stops by itself instead of generating until the next key cancels it.
  Once typing pauses the same prompt plus that text is continued up to `n_predict` (the prompt
  cache makes the continuation cost no prompt evaluation).
- The first part is stepped eagerly in the snapshot's own callback (eager.py): a server known to
  answer within a frame shows it there, with no task or loop turn.
- Speculation: once a suggestion is complete, the first part of the next one is computed as if
  it were accepted, so Tab-then-wait costs nothing.
- Alternatives on request, and warm-ups of the place the cursor rests at in Normal mode.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial

from .. import eager
from ..buffer_state import KEYSTROKE, BufferState
from ..config import Config
from ..pipeline.complete import Ask, Completion, Pipeline
from ..pipeline.reading import Stop
from ..privacy.gate import Gate
from ..snapshot import Snapshot, char_to_byte_col
from ..stats import Stats
from ..updates import Editor, Render, RenderPlan
from . import quiet
from .render import candidate

__all__ = ["Editor", "Engine", "accepted_snapshot"]


def accepted_snapshot(snap: Snapshot, text: str) -> Snapshot:
    """The snapshot the editor would send right after accepting `text` at the cursor."""
    idx = snap.row - snap.first
    line = snap.line
    cut = snap.char_col
    new = (line[:cut] + text + line[cut:]).split("\n")
    lines = snap.lines[:idx] + new + snap.lines[idx + 1 :]
    last = new[-1]
    tail_len = len(line) - cut
    col_chars = len(last) - tail_len
    # (the cursor stays on a line whose start the editor left out while the text has one line)
    line_from = snap.line_from if len(new) == 1 else 0
    return Snapshot(
        buf=snap.buf, tick=-1, row=snap.row + len(new) - 1, col=line_from + char_to_byte_col(last, col_chars),
        first=snap.first, lines=lines, nlines=snap.nlines + len(new) - 1, ft=snap.ft, path=snap.path,
        et=snap.et, sw=snap.sw, ts=snap.ts, seq=-1, line_from=line_from,
    )


def plan(snap: Snapshot, texts: list[str], *, final: bool, cached: bool = False) -> RenderPlan:
    return RenderPlan(buf=snap.buf, tick=snap.tick, row=snap.row, col=snap.col, seq=snap.seq,
                      items=[candidate(t) for t in texts], index=0, final=final, cached=cached)


class Superseded(Stop):
    """A newer snapshot waited for this request's answer to start; this one is stale."""


def _answered(state: BufferState) -> None:
    """The server started answering the buffer's request: it is answered, and stale when a
    newer snapshot waited for that (Engine.submit)."""
    state.unanswered = False
    if state.deferred is not None:
        raise Superseded()


class _Drawer:
    """Partial suggestions to the editor, at most one plan per frame (the first at once).

    A fast server streams a thousand tokens a second; a plan per token would cost Neovim a draw
    and the host an RPC per token, far more than a frame's worth of drawing."""

    def __init__(self, editor: Editor, snap: Snapshot, frame_s: float, shown: str = "") -> None:
        self.editor, self.snap, self.frame_s = editor, snap, frame_s
        self.loop = asyncio.get_running_loop()
        self.shown = shown
        self.drawn = bool(shown)
        self._last = float("-inf")
        self._pending: asyncio.TimerHandle | None = None

    def _draw(self) -> None:
        self._pending = None
        self._last = self.loop.time()
        self.drawn = True
        self.editor.update(Render(plan=plan(self.snap, [self.shown], final=False)))

    def on_text(self, text: str) -> None:
        if text == self.shown:
            return
        self.shown = text
        wait = self._last + self.frame_s - self.loop.time()
        if wait <= 0:
            self._draw()
        elif self._pending is None:
            self._pending = self.loop.call_later(wait, self._draw)

    def stop(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None


class Engine:
    ALTERNATIVES = 3
    ALT_TEMPERATURE = 0.8
    PARTIAL_FRAME_S = 0.016  # streamed (partial) suggestions are drawn at most this often
    # a continuation the server writes within this long comes as one answer: a response
    # within 0.1 s reads as instant, streamed or not (Nielsen's limit), and one answer is one
    # read and one draw instead of one per frame
    WHOLE_ANSWER_S = 0.1
    # suggestions in a row that may go unaccepted before the speculative prefetch pauses (until
    # the next accept): a user typing their own text gains nothing from it, and it costs the
    # server a prompt evaluation the next keystroke's request may queue behind
    SPECULATE_UNACCEPTED = 8

    def __init__(self, editor: Editor, pipeline: Pipeline, stats: Stats, privacy: Gate,
                 state: Callable[[int], BufferState], buffers: dict[int, BufferState]) -> None:
        self.editor = editor
        self.pipeline = pipeline
        self.stats = stats
        self.privacy = privacy
        self.state = state  # a buffer's state, made on first use (core.py owns them)
        self.buffers = buffers
        self._unaccepted = 0  # suggestions finished since the user last took one (or typed it)

    @property
    def config(self) -> Config | None:
        return self.pipeline.config

    def _ready(self, snap: Snapshot) -> bool:
        return self.pipeline.backend is not None and self.config is not None and not self.privacy.refuses(snap)

    # -- what the editor asks for ----------------------------------------------------------

    def submit(self, snap: Snapshot) -> None:
        """A new snapshot for a buffer: cancel what is in flight there, start anew."""
        if not self._ready(snap):
            self.cancel(snap.buf)
            return
        state = self.state(snap.buf)
        state.typing.key(asyncio.get_running_loop().time(), snap.interval)
        if state.hidden is not None:
            seen = quiet.verdict(state.hidden, snap)
            if seen != "open":
                state.hidden = None
            if seen == "typed":
                self.stats.count("quiet_false")
        if state.warming() and abs(state.warm_row - snap.row) > 1:
            state.cancel("warm")  # it warms another place (`o` opens the line below the one warmed)
        if state.pending():
            # The server has not answered the previous request yet: it sits in the server's
            # queue, and llama-server notices a closed connection there only once a second, so
            # cancelling it now would still cost its prompt evaluation later, one per key.
            # Keep it; when its answer starts it is dropped and this snapshot is sent (the
            # server's queue holds at most one stale request per buffer).
            state.deferred = snap
            state.cancel("speculative")
            self.stats.count("deferred")
            return
        # A request cancelled here closes its stream as its task winds down, at the loop's next
        # turn: the new one goes in a task behind it, so it is sent after that close (the
        # server then runs it in the buffer's slot once the old one stops: prompt/slots.py).
        # Otherwise the first part is stepped right here.
        after_cancel = self.cancel(snap.buf)
        state.start(lambda gen: self._suggest(state, snap, gen), eager=not after_cancel)

    def warm(self, snap: Snapshot) -> asyncio.Task[None] | None:
        """The cursor rests at a new place (Normal mode): have the server evaluate the prompt
        for it with nothing to generate, so the first key typed there finds it cached (on a
        CPU a cold prompt is most of a suggestion's time). Only where the backend can
        (`warms`); never while a real request for the buffer is in flight (it is evaluating
        a prompt here already), and a newer warm-up replaces an older one. Returns the
        warm-up's task, None when there is none."""
        backend = self.pipeline.backend
        if backend is None or not backend.warms or not self._ready(snap):
            return None
        state = self.state(snap.buf)
        if state.task is not None and not state.task.done():
            return None
        state.cancel("warm")
        state.warm_row = snap.row
        state.warm = asyncio.get_running_loop().create_task(self._warm(snap))
        return state.warm

    async def _warm(self, snap: Snapshot) -> None:
        self.stats.count("warmups")
        await self.pipeline.complete(snap, Ask(n_predict=0, cached=False, quiet=True))

    def alternatives(self, snap: Snapshot) -> None:
        """Fetch more candidates for the spot of `snap` (next/prev when only one is known)."""
        self.cancel(snap.buf)
        if not self._ready(snap):
            return
        state = self.state(snap.buf)
        state.start(lambda gen: self._alternatives(state, snap))

    def cancel(self, buf: int) -> bool:
        """Stop what a keystroke makes stale in `buf`; True when a live request was cancelled."""
        state = self.buffers.get(buf)
        if state is not None and state.cancel(KEYSTROKE):
            self.stats.count("cancels")
            return True
        return False

    def note_accept(self, kind: str) -> None:
        self.stats.count(f"accepts_{kind}")
        self._unaccepted = 0

    def note_typed_through(self, snap: Snapshot, text: str) -> None:
        """The user typed part of the shown suggestion; the rest is the answer for this spot,
        once post-processed again for the line as it is now (a rest that only repeats the line
        above, or a closer the typed text made a duplicate, is not kept)."""
        self.stats.count("typed_through")
        self._unaccepted = 0
        if self.config is None or not text:
            return
        checked = self.pipeline.recheck(snap, text)
        if checked != text:
            if not checked:
                self.stats.count("quiet")
            self.editor.update(Render(plan=plan(snap, [checked], final=True)))

    # -- a suggestion ------------------------------------------------------------------------

    # A quick first part (`n_predict_first` tokens) is asked for as one answer when the server
    # writes it all within one frame of the first (a stream would show nothing sooner: partial
    # text is drawn once a frame). One answer is one read and one draw instead of a read, a
    # timer and a draw per frame, and llama-server keeps the connection of an unstreamed
    # answer (it closes a streamed one).
    FIRST = Ask(first_part=True, whole_within_s=PARTIAL_FRAME_S)
    SPECULATIVE = Ask(first_part=True, whole_within_s=PARTIAL_FRAME_S, speculative=True)

    async def _suggest(self, state: BufferState, snap: Snapshot, gen: int) -> None:
        drawer = _Drawer(self.editor, snap, self.PARTIAL_FRAME_S)
        try:
            state.unanswered = True
            answered = partial(_answered, state)
            out = await self.pipeline.complete(snap, self.FIRST, on_text=drawer.on_text, on_answer=answered)
            if out.stop == "error":
                if drawer.drawn:  # a stream that broke half-way: its partial text is not to be accepted
                    self.editor.update(Render(plan=plan(snap, [""], final=True)))
                return
            self._first_shown(state, snap, out)
        except Superseded:
            pass
        except Exception:  # a bug (e.g. probing the server) must be said: a task's own is never read
            self.pipeline.reader.internal_error()
        finally:
            self._settle(state, drawer, gen)

    def _first_shown(self, state: BufferState, snap: Snapshot, out: Completion) -> None:
        """A first part is in: show it, and continue it once the user pauses (a timer: a key
        typed before then cancels it for nothing), or it is all."""
        if out.continuable:
            if out.text:  # nothing to show yet (a stream's drawer would not draw it either)
                self.editor.update(Render(plan=plan(snap, [out.text], final=False)))
            state.pause = asyncio.get_running_loop().call_at(state.typing.pause_end(), self._continue, state, snap, out)
            return
        self.editor.update(Render(plan=plan(snap, [out.text], final=True, cached=out.cached)))
        self._finished(state, snap, out)

    def _continue(self, state: BufferState, snap: Snapshot, first: Completion) -> None:
        state.pause = None
        state.start(lambda gen: self._rest(state, snap, first, gen))

    async def _rest(self, state: BufferState, snap: Snapshot, first: Completion, gen: int) -> None:
        """The rest of a suggestion after its first part, once the user paused."""
        drawer = _Drawer(self.editor, snap, self.PARTIAL_FRAME_S, shown=first.text)
        try:
            self.stats.count("continuations")
            state.unanswered = True
            answered = partial(_answered, state)
            ask = Ask(whole_within_s=self.WHOLE_ANSWER_S)  # (the rest of n_predict: the pipeline knows)
            out = await self.pipeline.complete(snap, ask, after=first, on_text=drawer.on_text, on_answer=answered)
            if out.stop == "error":  # broken half-way: the part shown is not to be accepted
                self.editor.update(Render(plan=plan(snap, [""], final=True)))
                return
            self.editor.update(Render(plan=plan(snap, [out.text], final=True)))
            self._finished(state, snap, out)
        except Superseded:
            pass
        finally:
            self._settle(state, drawer, gen)

    def _settle(self, state: BufferState, drawer: _Drawer, gen: int) -> None:
        """A request ends (its last plan shown: a partial one still pending is not drawn, and
        no loop turn came between): a snapshot that waited for its answer goes next."""
        drawer.stop()
        if not state.owns(gen):
            # cancelled, and wound down only now: a newer request owns the buffer, and a
            # snapshot waiting for that one's answer is its to send (it was dropped here)
            return
        state.unanswered = False
        newer, state.deferred = state.deferred, None
        if newer is not None:
            self.stats.count("cancels")
            state.start(lambda g: self._suggest(state, newer, g))

    def _finished(self, state: BufferState, snap: Snapshot, out: Completion) -> None:
        """A suggestion is complete: kept for alternatives, and the next one speculated."""
        if not out.text and out.raw.strip():
            # post-processing left nothing (it only repeated the line above or the text after
            # the cursor, or was blank): shown as nothing; the user typing what it hid makes
            # it a false one (quiet.py)
            self.stats.count("quiet")
            if out.prepared is not None:
                state.hidden = quiet.hidden(snap, out.raw, out.prepared.pctx)
        text = out.text
        state.last = (snap, text)
        cfg = self.config
        if not text or cfg is None or not cfg.speculate:
            return
        self._unaccepted += 1
        if self._unaccepted > self.SPECULATE_UNACCEPTED:
            return
        state.cancel("speculative")  # it speculated on an earlier text of this suggestion
        state.speculative = eager.start(self._speculate(snap, text))

    async def _speculate(self, snap: Snapshot, text: str) -> None:
        """Compute the suggestion that follows `text`, as if it were accepted; cache only.
        Only the quick first part: it is shown at once after accept, and continued from there
        once the user pauses (a whole n_predict here would make the server generate a full
        answer per suggestion that the user may never take)."""
        spec = accepted_snapshot(snap, text)
        if self.privacy.policy.refusal(spec.path, spec.lines) is not None:  # the model's text holds a credential
            return
        out = await self.pipeline.complete(spec, self.SPECULATIVE)
        if out.sent is not None:
            self.stats.count("speculative")

    async def _alternatives(self, state: BufferState, snap: Snapshot) -> None:
        backend = self.pipeline.backend
        assert backend is not None
        texts: list[str] = []
        last = state.last
        if last and last[0].tick == snap.tick and last[0].row == snap.row and last[0].col == snap.col and last[1]:
            texts.append(last[1])
        else:
            kept = await self.pipeline.cached(snap)
            if kept:
                texts.append(kept)
        wanted = self.ALTERNATIVES
        # sampled, and not kept: the cache holds the suggestion shown for the spot
        if backend.supports_n:
            asks = [Ask(temperature=self.ALT_TEMPERATURE, n=wanted, seed=1, cached=False)]
        else:
            asks = [Ask(temperature=self.ALT_TEMPERATURE, seed=i + 1, cached=False) for i in range(wanted)]
        for ask in asks:
            out = await self.pipeline.complete(snap, ask)
            if out.stop == "error" and (out.prepared is None or ask.n == 1):
                return
            for text in out.texts:
                if text and text not in texts:
                    texts.append(text)
        self.editor.update(Render(plan=plan(snap, texts, final=True)))
