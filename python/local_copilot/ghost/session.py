"""One object per buffer: everything the host keeps and runs for it, with one `cancel(kind)`, one
`abort()` (what a keystroke makes stale) and one `forget()` (the buffer is gone).

A buffer's session holds the suggestion's request (a first part, its continuation, or
alternatives) and the snapshot it answers, the answer being drawn (partial texts at most once
a frame), the pause timer (a first part shown, its rest fetched once typing pauses), one
snapshot deferred behind the request the server has not answered yet (what Lua's status()
calls 'waiting' is Lua's own: trigger.lua, see doc/architecture.md), the speculative request,
the warm-up, how fast the user types, and what the last suggestion was and what a quiet one
hid. Request kinds of other surfaces are further fields here (next edits, instruction edits,
the completion menu's request of Neovim's in-process language server), so a wiped buffer
stops each of them and closes its stream. Keeping them in one object means cancelling,
forgetting and handing over cannot leave one of them behind.

The ghost-text strategy's steps for one buffer live here too (engine.py hands each snapshot
to its buffer's session):

- Latest wins: a new snapshot cancels what is in flight, except a request the server has not
  answered yet, which the snapshot waits behind (`key`).
- First part and continuation: right after a keystroke only the first `n_predict_first` tokens
  are asked for: they are on screen within milliseconds, and while the user keeps typing each
  keystroke's request stops by itself instead of generating until the next key cancels it.
  Once typing pauses the same prompt plus that text is continued up to `n_predict` (the prompt
  cache makes the continuation cost no prompt evaluation).
- The first part is stepped eagerly in the snapshot's own callback (eager.py): a server known to
  answer within a frame shows it there, with no task or loop turn.
- Speculation: once a suggestion is complete, the first part of the next one is computed as if
  it were accepted, so Tab-then-wait costs nothing.

Instruction edits (instruct/runner.py) are tasks keyed by the edit's id, beside one prompt
warm-up: several edits in different places of a buffer run at once. The keystroke path's
latest-wins (`abort()`, `cancel(KEYSTROKE)`) leaves them alone (typing elsewhere in the buffer
must not stop an edit the user waits for); `cancel("edit")` stops them, and `cancel()` stops
everything (the buffer is wiped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from .. import eager as _eager
from ..pipeline.complete import Ask, Completion, Pipeline
from ..pipeline.reading import Stop
from ..privacy.gate import Gate
from ..snapshot import Snapshot
from ..stats import Stats
from ..updates import Editor, Render
from . import quiet
from .quiet import Hidden
from .render import accepted_snapshot, plan

__all__ = ["KEYSTROKE", "Session", "Shared"]

# what a keystroke makes stale: the suggestion's request (its task, its pause timer, the
# snapshot deferred behind it), the speculative request and the next-edit request. A warm-up of the
# same place and the instruction edits stay (see cancel's reason below and the module's).
KEYSTROKE = ("suggestion", "speculative", "next_edit")
KINDS = (*KEYSTROKE, "warm", "edit", "menu")

ALTERNATIVES = 3
ALT_TEMPERATURE = 0.8
PARTIAL_FRAME_S = 0.016  # streamed (partial) suggestions are drawn at most this often
# a continuation the server writes within this long comes as one answer: a response within
# 0.1 s reads as instant, streamed or not (Nielsen's limit), and one answer is one read and one
# draw instead of one per frame
WHOLE_ANSWER_S = 0.1
# suggestions in a row that may go unaccepted before the speculative prefetch pauses (until the
# next accept): a user typing their own text gains nothing from it, and it costs the server a
# prompt evaluation the next keystroke's request may queue behind
SPECULATE_UNACCEPTED = 8
# A quick first part (`n_predict_first` tokens) is asked for as one answer when the server
# writes it all within one frame of the first (a stream would show nothing sooner: partial
# text is drawn once a frame). One answer is one read and one draw instead of a read, a timer
# and a draw per frame, and llama-server keeps the connection of an unstreamed answer (it
# closes a streamed one).
FIRST = Ask(first_part=True, whole_within_s=PARTIAL_FRAME_S)
SPECULATIVE = Ask(first_part=True, whole_within_s=PARTIAL_FRAME_S, speculative=True)
WARM = Ask(n_predict=0, cached=False, quiet=True)
# how long the user must stop typing before a first part is continued: 2 typing intervals (a
# slower key is a pause), within these bounds. The editor measures the interval (it sees every
# key; the host sees only the snapshots it is sent) and sends it with each snapshot.
PAUSE_MIN_S = 0.06
PAUSE_MAX_S = 0.3


class Shared:
    """What every buffer's session shares, built once per host (ghost/engine.py): the editor
    port, the pipeline, the stats, the privacy gate, and the suggestions finished since the
    user last took one (or typed it)."""

    __slots__ = ("editor", "pipeline", "stats", "privacy", "unaccepted")

    def __init__(self, editor: Editor, pipeline: Pipeline, stats: Stats, privacy: Gate) -> None:
        self.editor, self.pipeline, self.stats, self.privacy = editor, pipeline, stats, privacy
        self.unaccepted = 0


class Session:
    __slots__ = ("buf", "shared", "task", "generation", "speculative", "pause", "deferred", "unanswered", "last",
                 "typed_at", "interval_s", "warm", "warm_row", "next_edit", "edits", "edit_warm", "menu", "hidden",
                 "drawing", "shown", "drawn", "drawn_at", "draw_timer")

    def __init__(self, buf: int, shared: Shared) -> None:
        self.buf, self.shared = buf, shared
        self.task: asyncio.Task[None] | None = None  # the suggestion's request task (None: ran eagerly)
        # counts the suggestion's requests started or cancelled: a request whose number it no
        # longer is has been replaced
        self.generation = 0
        self.speculative: asyncio.Task[None] | None = None
        self.pause: asyncio.TimerHandle | None = None  # continues a first part once typing pauses
        # the newest snapshot, waiting for the answer to `task`'s request to start (see key()):
        # the server would evaluate that request anyway
        self.deferred: Snapshot | None = None
        # `task`'s request is out and the server has not answered it yet
        self.unanswered = False
        self.last: tuple[Snapshot, str] | None = None  # the last finished snapshot and its text
        # what the last quiet answer hid (ghost/quiet.py), until the user types it or moves on
        self.hidden: Hidden | None = None
        self.typed_at = float("-inf")  # loop time of the last snapshot
        self.interval_s: float | None = None  # the user's smoothed interval between keys
        # a warm-up: the prompt of the place the cursor rests at, evaluated with nothing to
        # generate (warm_up())
        self.warm: asyncio.Task[None] | None = None
        self.warm_row = -1
        self.next_edit: asyncio.Task[None] | None = None  # the next-edit request (next_edit/request.py)
        self.edits: dict[int, asyncio.Task[None]] = {}  # instruction edits in flight, by id
        self.edit_warm: asyncio.Task[None] | None = None  # the prompt of the edit being typed
        # the completion menu's request (nvim/lsp_requests.py); typing does not stop it, the
        # menu's next request does
        self.menu: asyncio.Task[Any] | None = None
        # the answer being drawn: the snapshot it answers, its text on screen (or due at the
        # next frame), whether a plan of it was sent, when, and the timer of the next one. A fast
        # server streams a thousand tokens a second; a plan per token would cost Neovim a draw
        # and the host an RPC per token, far more than a frame's worth of drawing.
        self.drawing: Snapshot | None = None
        self.shown = ""
        self.drawn = False
        self.drawn_at = float("-inf")
        self.draw_timer: asyncio.TimerHandle | None = None

    # -- a keystroke ---------------------------------------------------------------------------

    def key(self, snap: Snapshot) -> None:
        """A new snapshot (the engine checked the backend and the privacy policy): cancel what
        is in flight, start anew."""
        self.typed_at = asyncio.get_running_loop().time()
        self.interval_s = None if snap.interval is None else snap.interval / 1000
        if self.hidden is not None:
            seen = quiet.verdict(self.hidden, snap)
            if seen != "open":
                self.hidden = None
            if seen == "typed":
                self.shared.stats.count("quiet_false")
        warm = self.warm
        if warm is not None and not warm.done() and abs(self.warm_row - snap.row) > 1:
            self.cancel("warm")  # it warms another place (`o` opens the line below the one warmed)
        task = self.task
        if self.unanswered and task is not None and not task.done():
            # The server has not answered the previous request yet: it sits in the server's
            # queue, and llama-server notices a closed connection there only once a second, so
            # cancelling it now would still cost its prompt evaluation later, one per key.
            # Keep it; when its answer starts it is dropped and this snapshot is sent (the
            # server's queue holds at most one stale request per buffer).
            self.deferred = snap
            self.cancel("speculative")
            self.shared.stats.count("deferred")
            return
        # A request cancelled here closes its stream as its task winds down, at the loop's next
        # turn: the new one goes in a task behind it, so it is sent after that close (the
        # server then runs it in the buffer's slot once the old one stops: backends/slots.py).
        # Otherwise the first part is stepped right here.
        after_cancel = self.abort()
        self.start(self._suggest, snap, eager=not after_cancel)

    def abort(self) -> bool:
        """Stop what a keystroke makes stale (KEYSTROKE); True when a live request was cancelled."""
        if self.cancel(KEYSTROKE):
            self.shared.stats.count("cancels")
            return True
        return False

    def start(self, run: Callable[..., Coroutine[Any, Any, None]], *args: Any, eager: bool = False) -> None:
        """Run `run(*args, number)` as the suggestion's request (the one before must be done or
        cancelled); a request whose `number` `generation` no longer is has been replaced. `eager`: stepped right here, up to its
        first wait (eager.py)."""
        self.generation += 1
        number = self.generation
        self.task = None
        coro = run(*args, number)
        task = _eager.start(coro) if eager else asyncio.get_running_loop().create_task(coro)
        if self.generation == number:  # (a request that finished eagerly may have started the next)
            self.task = task

    # -- a suggestion --------------------------------------------------------------------------

    def _answered(self) -> bool:
        """The server started answering the buffer's request: it is answered, and stale (True:
        the pipeline abandons it) when a newer snapshot waited for that (key())."""
        self.unanswered = False
        return self.deferred is not None

    def _partial(self, text: str) -> None:
        """A partial text of the answer being drawn: drawn at most once a frame, the first at once."""
        if text == self.shown:
            return
        self.shown = text
        loop = asyncio.get_running_loop()
        wait = self.drawn_at + PARTIAL_FRAME_S - loop.time()
        if wait <= 0:
            self._draw()
        elif self.draw_timer is None:
            self.draw_timer = loop.call_later(wait, self._draw)

    def _draw(self) -> None:
        self.draw_timer = None
        self.drawn_at = asyncio.get_running_loop().time()
        self.drawn = True
        assert self.drawing is not None
        self.shared.editor.update(Render(plan=plan(self.drawing, [self.shown], final=False)))

    def _stop_drawing(self) -> None:
        if self.draw_timer is not None:
            self.draw_timer.cancel()
            self.draw_timer = None

    async def _suggest(self, snap: Snapshot, gen: int) -> None:
        shared = self.shared
        editor = shared.editor
        # its answer is drawn from here on (nothing of it on screen yet)
        self.drawing, self.shown, self.drawn, self.drawn_at = snap, "", False, float("-inf")
        try:
            self.unanswered = True
            out = await shared.pipeline.complete(snap, FIRST, on_text=self._partial, on_answer=self._answered)
            if out.stop == "error":
                if self.drawn and self.generation == gen:  # a stream that broke half-way: its partial text is not to be accepted
                    editor.update(Render(plan=plan(snap, [""], final=True)))
                return
            if out.continuable:
                # a first part: shown, and continued once the user pauses (a timer: a key typed
                # before then cancels it for nothing)
                if out.text:  # nothing to show yet (a stream's partial drawing would not draw it either)
                    editor.update(Render(plan=plan(snap, [out.text], final=False)))
                # the user has stopped typing for a bit: 2 typing intervals after the last key
                iv = self.interval_s
                pause_end = self.typed_at + (PAUSE_MIN_S if iv is None else min(PAUSE_MAX_S, max(PAUSE_MIN_S, 2 * iv)))
                self.pause = asyncio.get_running_loop().call_at(pause_end, self._continue, snap, out)
                return
            editor.update(Render(plan=plan(snap, [out.text], final=True, cached=out.cached)))
            self._finished(snap, out)
        except Stop:
            pass
        except Exception:  # a bug (e.g. probing the server) must be said: a task's own is never read
            shared.pipeline.internal_error()
        finally:
            self._settle(gen)

    def _continue(self, snap: Snapshot, first: Completion) -> None:
        self.pause = None
        self.start(self._rest, snap, first)

    async def _rest(self, snap: Snapshot, first: Completion, gen: int) -> None:
        """The rest of a suggestion after its first part, once the user paused."""
        shared = self.shared
        # its answer is drawn from here on, the first part on screen already
        self.drawing, self.shown, self.drawn, self.drawn_at = snap, first.text, bool(first.text), float("-inf")
        try:
            shared.stats.count("continuations")
            self.unanswered = True
            ask = Ask(whole_within_s=WHOLE_ANSWER_S)  # (the rest of n_predict: the pipeline knows)
            out = await shared.pipeline.complete(snap, ask, after=first, on_text=self._partial,
                                                 on_answer=self._answered)
            if out.stop == "error":  # broken half-way: the part shown is not to be accepted
                shared.editor.update(Render(plan=plan(snap, [""], final=True)))
                return
            shared.editor.update(Render(plan=plan(snap, [out.text], final=True)))
            self._finished(snap, out)
        except Stop:
            pass
        finally:
            self._settle(gen)

    def _settle(self, gen: int) -> None:
        """A request ends (its last plan shown: a partial one still pending is not drawn, and
        no loop turn came between): a snapshot that waited for its answer goes next."""
        if self.generation != gen:
            # cancelled, and wound down only now: a newer request owns the buffer (and its
            # drawing), and a snapshot waiting for that one's answer is its to send (it was
            # dropped here)
            return
        if self.draw_timer is not None:
            self._stop_drawing()
        self.unanswered = False
        newer, self.deferred = self.deferred, None
        if newer is not None:
            self.shared.stats.count("cancels")
            self.start(self._suggest, newer)

    def _finished(self, snap: Snapshot, out: Completion) -> None:
        """A suggestion is complete: kept for alternatives, and the next one speculated."""
        shared = self.shared
        if not out.text and out.raw.strip():
            # post-processing left nothing (it only repeated the line above or the text after
            # the cursor, or was blank): shown as nothing; the user typing what it hid makes
            # it a false one (quiet.py)
            shared.stats.count("quiet")
            if out.prepared is not None:
                self.hidden = quiet.hidden(snap, out.raw, out.prepared.pctx)
        text = out.text
        self.last = (snap, text)
        cfg = shared.pipeline.config
        if not text or cfg is None or not cfg.speculate:
            return
        shared.unaccepted += 1
        if shared.unaccepted > SPECULATE_UNACCEPTED:
            return
        self.cancel("speculative")  # it speculated on an earlier text of this suggestion
        self.speculative = _eager.start(self._speculate(snap, text))

    async def _speculate(self, snap: Snapshot, text: str) -> None:
        """Compute the suggestion that follows `text`, as if it were accepted; cache only.
        Only the quick first part: it is shown at once after accept, and continued from there
        once the user pauses (a whole n_predict here would make the server generate a full
        answer per suggestion that the user may never take)."""
        shared = self.shared
        spec = accepted_snapshot(snap, text)
        if shared.privacy.policy.refusal(spec.path, spec.lines) is not None:  # the model's text holds a credential
            return
        out = await shared.pipeline.complete(spec, SPECULATIVE)
        if out.sent is not None:
            shared.stats.count("speculative")

    def alternatives(self, snap: Snapshot) -> None:
        """Fetch more candidates for the spot of `snap` (the engine cancelled what ran)."""
        self.start(self._alternatives, snap)

    async def _alternatives(self, snap: Snapshot, gen: int) -> None:
        shared = self.shared
        pipeline = shared.pipeline
        backend = pipeline.backend
        assert backend is not None
        texts: list[str] = []
        last = self.last
        if last and last[0].tick == snap.tick and last[0].row == snap.row and last[0].col == snap.col and last[1]:
            texts.append(last[1])
        else:
            kept = await pipeline.cached(snap)
            if kept:
                texts.append(kept)
        # sampled, and not kept: the cache holds the suggestion shown for the spot
        if backend.supports_n:
            asks = [Ask(temperature=ALT_TEMPERATURE, n=ALTERNATIVES, seed=1, cached=False)]
        else:
            asks = [Ask(temperature=ALT_TEMPERATURE, seed=i + 1, cached=False) for i in range(ALTERNATIVES)]
        for ask in asks:
            out = await pipeline.complete(snap, ask)
            if out.stop == "error" and (out.prepared is None or ask.n == 1):
                return
            for text in out.texts:
                if text and text not in texts:
                    texts.append(text)
        shared.editor.update(Render(plan=plan(snap, texts, final=True)))

    def warm_up(self, snap: Snapshot) -> asyncio.Task[None] | None:
        """Have the server evaluate the prompt of the place the cursor rests at, with nothing
        to generate (the engine checked the backend warms); never while a real request is in
        flight (it is evaluating a prompt here already), and a newer warm-up replaces an older
        one. Returns the warm-up's task, None when there is none."""
        if self.task is not None and not self.task.done():
            return None
        self.cancel("warm")
        self.warm_row = snap.row
        self.warm = asyncio.get_running_loop().create_task(self._warm(snap))
        return self.warm

    async def _warm(self, snap: Snapshot) -> None:
        self.shared.stats.count("warmups")
        await self.shared.pipeline.complete(snap, WARM)

    # -- the other surfaces' requests -----------------------------------------------------------

    def start_edit(self, edit_id: int, coro: Coroutine[Any, Any, None]) -> None:
        """Run edit `edit_id` (the one before with that id must be cancelled)."""
        task = self.edits[edit_id] = asyncio.get_running_loop().create_task(coro)

        def done(t: asyncio.Task[None]) -> None:
            if self.edits.get(edit_id) is t:
                del self.edits[edit_id]

        task.add_done_callback(done)

    def start_edit_warm(self, coro: Coroutine[Any, Any, None]) -> None:
        if self.edit_warm is not None and not self.edit_warm.done():
            self.edit_warm.cancel()
        self.edit_warm = asyncio.get_running_loop().create_task(coro)

    # -- everything in flight ------------------------------------------------------------------

    def running(self) -> list[asyncio.Task[Any]]:
        """The tasks still running for this buffer (a closing host waits for them to wind down)."""
        tasks = (self.task, self.speculative, self.warm, self.next_edit, self.edit_warm, self.menu,
                 *self.edits.values())
        return [t for t in tasks if t is not None and not t.done()]

    def warming(self) -> bool:
        return self.warm is not None and not self.warm.done()

    def cancel(self, kind: str | tuple[str, ...] | None = None, *, edit_id: int | None = None) -> bool:
        """Stop what is in flight of `kind` (one of KINDS, several, or all when None); True when
        a live request of the suggestion or an edit was cancelled. Cancelling a task exits its
        `async with` over the HTTP exchange, which closes the connection: the server stops
        generating.

        "edit" stops edit `edit_id`, or every edit and the edit prompt's warm-up. "warm": a
        request at the same place does not stop the warm-up (what it evaluates is that
        request's prompt too, and the server finishes the batch it is in anyway), so only a
        newer place or a closed buffer does."""
        kinds = KINDS if kind is None else (kind,) if isinstance(kind, str) else kind
        stopped = False
        if "suggestion" in kinds:
            self.deferred = None
            # what was unanswered is the request cancelled here: a task cancelled before it
            # ran cannot say so, and a snapshot deferred on its word would wait for nothing
            self.unanswered = False
            self.generation += 1
            if self.pause is not None:
                self.pause.cancel()
                self.pause = None
            if self.draw_timer is not None:  # (a partial text of the request cancelled)
                self._stop_drawing()
            task, self.task = self.task, None
            stopped = task is not None and _stop(task)
        if "speculative" in kinds and self.speculative is not None:
            task, self.speculative = self.speculative, None
            if not task.done():  # (every key: the speculation on the suggestion before)
                task.cancel()
        if "next_edit" in kinds and self.next_edit is not None:
            task, self.next_edit = self.next_edit, None
            _stop(task)
        if "warm" in kinds and self.warm is not None:
            task, self.warm = self.warm, None
            _stop(task)
        if "menu" in kinds and self.menu is not None:
            task, self.menu = self.menu, None
            _stop(task)
        if "edit" in kinds:
            if edit_id is None:
                _stop(self.edit_warm)
                self.edit_warm = None
            for i in list(self.edits) if edit_id is None else [edit_id]:
                stopped = _stop(self.edits.pop(i, None)) or stopped
        return stopped

    def forget(self) -> None:
        """The buffer is gone: stop everything in flight and drop what is kept for it here and
        where the pipeline keeps it (its fitted window, its server slot) and the privacy gate's
        verdicts (its last suggestion's snapshot holds a whole window of its text)."""
        self.abort()
        self.cancel()
        self.last = self.deferred = self.drawing = None
        pipeline = self.shared.pipeline
        pipeline.prompts.forget_buffer(self.buf)
        if pipeline.backend is not None:
            pipeline.backend.slots.forget(self.buf)
        self.shared.privacy.forget(self.buf)

    def in_flight(self) -> dict[str, int]:
        """What is running (tests and the bench wait until nothing is)."""
        return {
            "tasks": int(self.task is not None and not self.task.done()),
            "speculative": int(self.speculative is not None and not self.speculative.done()),
            "pauses": int(self.pause is not None and not self.pause.cancelled()),
            "next_edits": int(self.next_edit is not None and not self.next_edit.done()),
            "edits": sum(1 for t in self.edits.values() if not t.done()),
            "warmups": int(self.warming()),
            "menus": int(self.menu is not None and not self.menu.done()),
        }


def _stop(task: asyncio.Task[Any] | None) -> bool:
    """Cancel `task`; True when it was live."""
    if task is not None and not task.done():
        task.cancel()
        return True
    return False
