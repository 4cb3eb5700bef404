"""The request lifecycle: latest wins per buffer, answers become render plans.

Everything here runs on the worker's asyncio loop (see worker.py); the editor is reached only
through the `Editor` port, whose Neovim implementation hops to pynvim's thread.

This is the strategy: when to send what. Reading one answer (its chunks through the
post-processor, the server's speed, whether the server answered) is reading.py's `Reader`.

Per snapshot: the cache may answer at once; otherwise a streaming request whose text goes
through the post-processor on every chunk. Right after a keystroke only the first
`n_predict_first` tokens are asked for: they are on screen within milliseconds, and while the
user keeps typing each keystroke's request stops by itself instead of generating until the
next key cancels it. Once typing pauses the same prompt plus that text is continued up to
`n_predict` (the prompt cache makes the continuation cost no prompt evaluation). A server fast
enough to write a part within a frame or two answers it in one piece instead of a stream.
Once a suggestion is complete, a speculative request computes the first part of the next one
as if it were accepted, so Tab-then-wait costs nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import httpx
import msgspec

from ..transport.access import async_client
from ..backends import Backend, FimRequest, make_backend
from ..backends.exchange import Exchange
from ..buffer_state import BufferState
from ..pipeline.cache import SuggestionCache, context_key
from ..config import Config
from ..prompt.context import build_context
from ..prompt.prepare import Prepared, Preparer, post_context
from ..errors import BackendError, ConfigError
from ..instruct.runner import EditRunner, EditUpdate
from ..log import log
from ..notify import Episodes
from ..pipeline.postprocess import process
from .render import RenderPlan, candidate
from ..next_edit.request import NextEdits
from ..privacy.policy import Gate
from ..pipeline.reading import Outcome, PromptTooLong, Reader, Superseded
from ..snapshot import Snapshot, char_to_byte_col
from ..stats import Stats

__all__ = ["Editor", "Engine", "accepted_snapshot"]


class Editor(Protocol):
    def show(self, plan: RenderPlan) -> None: ...

    def notify(self, message: str, level: str) -> None: ...

    def backend_state(self, state: str, message: str) -> None: ...

    # the privacy policy refuses a buffer's text (`kind` 'path' or 'content'), or (reason None) no longer does
    def private(self, buf: int, path: str, reason: str | None, kind: str) -> None: ...

    # the policy's path rules as [Lua pattern, reason] pairs, with each configuration
    def privacy_rules(self, rules: list[list[str]]) -> None: ...

    # a next edit to draw (next_edit/request.py: buffer, tick, cursor, span, text)
    def show_next_edit(self, plan: dict[str, Any]) -> None: ...

    # an instruction edit's preview (instruct/runner.py)
    def edit_update(self, update: EditUpdate) -> None: ...


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
    return Snapshot(
        buf=snap.buf, tick=-1, row=snap.row + len(new) - 1, col=char_to_byte_col(last, col_chars),
        first=snap.first, lines=lines, nlines=snap.nlines + len(new) - 1, ft=snap.ft, path=snap.path,
        et=snap.et, sw=snap.sw, ts=snap.ts, seq=-1,
    )


class _Drawer:
    """Partial suggestions to the editor, at most one plan per frame (the first at once).

    A fast server streams a thousand tokens a second; a plan per token would cost Neovim a draw
    and the host an RPC per token, far more than a frame's worth of drawing."""

    def __init__(self, engine: Engine, snap: Snapshot) -> None:
        self.engine, self.snap = engine, snap
        self.loop = asyncio.get_running_loop()
        self.shown = ""
        self.drawn = False
        self._last = float("-inf")
        self._pending: asyncio.TimerHandle | None = None

    def _draw(self) -> None:
        self._pending = None
        self._last = self.loop.time()
        self.drawn = True
        self.engine.editor.show(self.engine._plan(self.snap, [self.shown], final=False))

    def on_text(self, text: str) -> None:
        if text == self.shown:
            return
        self.shown = text
        wait = self._last + self.engine.PARTIAL_FRAME_S - self.loop.time()
        if wait <= 0:
            self._draw()
        elif self._pending is None:
            self._pending = self.loop.call_later(wait, self._draw)

    def flush(self) -> None:
        """Draw what is pending now (the last text of a stream that is done)."""
        if self._pending is not None:
            self._pending.cancel()
            self._draw()

    def stop(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None


class Engine:
    ALTERNATIVES = 3
    ALT_TEMPERATURE = 0.8
    PARTIAL_FRAME_S = 0.016  # streamed (partial) suggestions are drawn at most this often
    # a continuation the server writes within this long comes as one answer (_continuation):
    # a response within 0.1 s reads as instant, streamed or not (Nielsen's limit)
    WHOLE_ANSWER_S = 0.1
    # suggestions in a row that may go unaccepted before the speculative prefetch pauses (until
    # the next accept): a user typing their own text gains nothing from it, and it costs the
    # server a prompt evaluation the next keystroke's request may queue behind
    SPECULATE_UNACCEPTED = 8

    def __init__(self, editor: Editor) -> None:
        self.editor = editor
        self.config: Config | None = None
        self.backend: Backend | None = None
        self._client: httpx.AsyncClient | None = None
        self.buffers: dict[int, BufferState] = {}  # what is in flight and kept, per buffer
        # failure messages, one per episode of each backend (shared with next edits)
        self.episodes = Episodes(editor.notify)
        self.prompts = Preparer()  # snapshots into requests (prompt/prepare.py)
        self.cache = SuggestionCache()
        self.stats = Stats()
        # each answer read, the server's speed per token measured, success and failure reported
        # (reading.py); the ghost-text backend's failure messages once configured
        self.reader = Reader(editor, self.prompts, self.stats, self.episodes.of(""))
        self.privacy = Gate(editor, self.prompts.ring)  # what may be sent (privacy.py)
        # next edits: a second request kind of the per-buffer state (next_edit/request.py)
        self.next_edits = NextEdits(editor, self.stats, self.privacy, self.state, self.episodes)
        self._unaccepted = 0  # suggestions finished since the user last took one (or typed it)
        # instruction edits (instruct/)
        self.edits = EditRunner(editor, self.stats, self.privacy, self.buffers, self.state, lambda: self.config)

    # -- configuration -------------------------------------------------------------------

    def configure(self, cfg: Config) -> None:
        self.cancel_all()
        self.config = cfg
        active = cfg.active
        timeout = httpx.Timeout(active.timeout_ms / 1000, connect=2.0)
        if self._client is not None:
            asyncio.get_running_loop().create_task(self._client.aclose())
        if self.backend is not None:
            self.backend.close()
        # one long-lived client: keep-alive to the server, closed streams cancel generation
        # (every entry's trust: next edits may ask another entry's server through it; access.py)
        self._client = async_client(cfg.backends.values(), timeout=timeout)
        self.backend = make_backend(cfg.backend, active, self._client)
        self.prompts.new_server()  # bytes per token differ between models
        self.reader.configure(self.backend, self.episodes.of(cfg.backend))
        self.cache.clear()
        self.stats.set_backend(cfg.backend)
        self.privacy.configure(cfg)
        self.next_edits.configure(cfg, self.backend, self._client)
        self.edits.configure(cfg)

    def sizing(self) -> dict[str, object]:
        """The active server's measured speeds and the context the last prompt used (stats and
        health show them)."""
        return {**self.prompts.speed.describe(), "context": dict(self.prompts.in_use),
                "latency_target_ms": self.config.latency_target_ms if self.config else None}

    # -- requests ------------------------------------------------------------------------

    def submit(self, snap: Snapshot) -> None:
        """A new snapshot for a buffer: cancel what is in flight there, start anew."""
        if self.backend is None or self.config is None or self.privacy.refuses(snap):
            self.cancel(snap.buf)
            return
        state = self.state(snap.buf)
        state.typing.key(asyncio.get_running_loop().time(), snap.interval)
        if state.warming() and abs(state.warm_row - snap.row) > 1:
            state.cancel_warm()  # it warms another place (`o` opens the line below the one warmed)
        if state.pending():
            # The server has not answered the previous request yet: it sits in the server's
            # queue, and llama-server notices a closed connection there only once a second, so
            # cancelling it now would still cost its prompt evaluation later, one per key.
            # Keep it; when its answer starts it is dropped and this snapshot is sent (the
            # server's queue holds at most one stale request per buffer).
            state.waiting = snap
            state.cancel_speculative()
            self.stats.count("deferred")
            return
        # A request cancelled here closes its stream as its task winds down, at the loop's next
        # turn: the new one goes in a task behind it, which waits until the server has let go
        # of the slot holding the buffer's prompt (prompt/slots.py)
        if self.cancel(snap.buf):
            state.start(self._run(state, snap, after_cancel=True))
        elif not self._first_now(state, snap):
            state.start(self._run(state, snap))

    def warm(self, snap: Snapshot) -> asyncio.Task[None] | None:
        """The cursor rests at a new place (Normal mode): have the server evaluate the prompt
        for it with nothing to generate, so the first key typed there finds it cached (on a
        CPU a cold prompt is most of a suggestion's time). Only where the backend can
        (`warms`); never while a real request for the buffer is in flight (it is evaluating
        a prompt here already), and a newer warm-up replaces an older one. Returns the
        warm-up's task, None when there is none."""
        backend, cfg = self.backend, self.config
        if backend is None or cfg is None or not backend.warms or self.privacy.refuses(snap):
            return None
        state = self.state(snap.buf)
        if state.task is not None and not state.task.done():
            return None
        state.cancel_warm()
        state.warm_row = snap.row
        state.warm = asyncio.get_running_loop().create_task(self._run_warm(snap))
        return state.warm

    async def _run_warm(self, snap: Snapshot) -> None:
        assert self.backend is not None
        exchange: Exchange | None = None
        try:
            prep = await self._prepare(snap)
            exchange = await self.backend.exchange(_with(prep.req, n_predict=0, stream=False))
            self.stats.count("warmups")
            async for chunk in exchange.chunks():
                if chunk.timings:
                    self.prompts.speed.observe(chunk.timings)
                if chunk.slot is not None:
                    self.prompts.slots.learn(snap.buf, chunk.slot)
                if chunk.done:
                    break
        except asyncio.CancelledError:
            raise
        except (BackendError, ConfigError) as exc:
            # the next real request reports the server's state; a warm-up stays quiet
            log.debug("warm-up failed: %s", exc)
        except Exception:  # a bug must not reach :messages as a stack trace
            log.exception("warm-up failed")
        finally:
            if exchange is not None:
                exchange.abort()

    def alternatives(self, snap: Snapshot) -> None:
        """Fetch more candidates for the spot of `snap` (next/prev when only one is known)."""
        self.cancel(snap.buf)
        if self.backend is None or self.config is None or self.privacy.refuses(snap):
            return
        state = self.state(snap.buf)
        state.start(self._run_alternatives(state, snap))

    def state(self, buf: int) -> BufferState:
        """`buf`'s state, made on first use (every request kind keeps its tasks there)."""
        state = self.buffers.get(buf)
        if state is None:
            state = self.buffers[buf] = BufferState()
        return state

    def cancel(self, buf: int) -> bool:
        """Stop what is in flight for `buf`; True when a live request was cancelled."""
        state = self.buffers.get(buf)
        if state is not None and state.cancel():
            self.stats.count("cancels")
            return True
        return False

    def forget(self, buf: int) -> None:
        """The buffer is gone: drop what is kept for it (its last suggestion's snapshot holds
        a whole window of its text)."""
        self.cancel(buf)
        state = self.buffers.pop(buf, None)
        if state is not None:
            state.close()
        self.prompts.forget_buffer(buf)
        self.privacy.forget(buf)

    def cancel_all(self) -> None:
        for buf in list(self.buffers):
            self.cancel(buf)
            self.buffers[buf].cancel_warm()

    def add_chunk(self, filename: str, lines: list[str], around: int | None = None) -> None:
        """Text of another buffer (entered, left, written, or around a cursor jump)."""
        if not self.privacy.refuses_file(filename):
            self.prompts.ring.add(filename, lines, around=around)

    def add_yank(self, filename: str, lines: list[str]) -> None:
        if not self.privacy.refuses_file(filename):
            self.prompts.ring.chunk_from_yank(filename, lines)

    def note_accept(self, kind: str) -> None:
        self.stats.count(f"accepts_{kind}")
        self._unaccepted = 0

    def note_typed_through(self, snap: Snapshot, text: str) -> None:
        """The user typed part of the shown suggestion; the rest is the answer for this spot,
        once post-processed again for the line as it is now (a rest that only repeats the line
        above, or a closer the typed text made a duplicate, is not kept)."""
        self.stats.count("typed_through")
        self._unaccepted = 0
        if self.config is not None and text:
            ctx = build_context(snap, lines_before=self.config.context.lines_before,
                                lines_after=self.config.context.lines_after)
            if self.backend is not None:
                pctx = post_context(snap, ctx, self.config, self.backend.stop_strings)
                checked = process(text, pctx, final=True).text
                if checked != text:
                    if not checked:
                        self.stats.count("quiet")
                    text = checked
                    self.editor.show(self._plan(snap, [text], final=True))
            self.cache.put(context_key(ctx), text)

    async def close(self) -> None:
        self.cancel_all()
        self.next_edits.close()
        for state in self.buffers.values():
            state.close()
        await self.edits.close()
        if self.backend is not None:
            self.backend.close()
        if self._client is not None:
            await self._client.aclose()

    # -- internals -----------------------------------------------------------------------

    async def _prepare(self, snap: Snapshot, *, speculative: bool = False) -> Prepared:
        assert self.backend is not None
        return self._prepare_for(snap, await self.backend.context_limit(), speculative=speculative)

    def _prepare_for(self, snap: Snapshot, limit: int | None, *, speculative: bool = False) -> Prepared:
        """_prepare() for a server whose context per request is `limit` tokens."""
        assert self.config is not None and self.backend is not None
        return self.prompts.prepare(snap, self.config, limit, self.backend.stop_strings, speculative=speculative,
                                    style=self.backend.style)

    @staticmethod
    def _plan(snap: Snapshot, texts: list[str], *, final: bool, cached: bool = False, index: int = 0) -> RenderPlan:
        return RenderPlan(buf=snap.buf, tick=snap.tick, row=snap.row, col=snap.col, seq=snap.seq,
                          items=[candidate(t) for t in texts], index=index, final=final, cached=cached)

    def _first_request(self, req: FimRequest) -> FimRequest:
        """The request for a quick first part: `n_predict_first` tokens, asked for as one answer
        when the server writes them all within one frame of the first (a stream would show
        nothing sooner: partial text is drawn once a frame). One answer is one read and one
        draw instead of a read, a timer and a draw per frame, and llama-server keeps the
        connection of an unstreamed answer (it closes a streamed one), so a request costs the
        host less CPU. A slower server streams."""
        first = self._first_n()
        if first == req.n_predict:
            return req
        whole = self._answers_within(first, self.PARTIAL_FRAME_S)
        return _with(req, n_predict=first, stream=not whole, quick=whole)

    def _continuation(self, req: FimRequest, base_raw: str) -> FimRequest:
        """The request for the rest after a first part: the same prompt plus what the model wrote
        (only those tokens are new to the server). Asked for as one answer when the server
        writes all of it within WHOLE_ANSWER_S: streamed, the rest would grow for a few frames
        only, for a paced read per frame (each a read, a parse, a post-processing pass and a
        draw) of host CPU. A key typed
        meanwhile waits for that answer (llama-server would finish it anyway: it notices a
        closed unstreamed connection only once a second), which WHOLE_ANSWER_S bounds."""
        n = req.n_predict - self._first_n()
        whole = self._answers_within(n, self.WHOLE_ANSWER_S)
        return _with(req, middle=req.middle + base_raw, n_predict=n, stream=not whole)

    def _answers_within(self, n: int, seconds: float) -> bool:
        """Whether the server, at its known speed, writes `n` tokens within `seconds` of the
        first: then they are asked for as one answer (counted) instead of a stream."""
        ms = self.reader.token_ms
        whole = ms is not None and (n - 1) * ms <= seconds * 1000
        if whole:
            self.stats.count("unstreamed")
        return whole

    def _first_n(self) -> int:
        """Tokens the first request after a keystroke asks for (all of n_predict when off)."""
        assert self.config is not None
        first = self.config.n_predict_first
        if self.backend is None or not self.backend.continues:
            return self.config.n_predict
        return first if 0 < first < self.config.n_predict else self.config.n_predict

    def _first_now(self, state: BufferState, snap: Snapshot) -> bool:
        """The first part of a suggestion right here, in the snapshot's own callback: the
        common case while typing (a server known to answer within a frame, one request per
        keystroke): a task per key, its loop turns, the stream's async layers and a cancelled
        pause per key are a fifth of the host's CPU budget per key. False when this does not
        apply (nothing was
        done): the caller starts the usual task. An answer that is not there in time, or is
        not plain, goes on in a task as it would have."""
        backend = self.backend
        assert backend is not None and self.config is not None
        if not backend.answers_now:
            return False
        try:
            prep = self._prepare_for(snap, backend.context_limit_now())
            if self._shown_from_cache(state, snap, prep):
                return True
            exchange = backend.exchange_now(self._first_request(prep.req))
            if exchange is None:
                return False
            self.stats.count("requests")
            got = self.reader.answer_now(prep, exchange)
            if got is not None:
                self._first_shown(state, snap, prep, got)
                return True
            # counted and looked up in the cache already: the task goes on from the exchange
            state.start(self._run(state, snap, prep, exchange))
            if exchange.sent:
                # unanswered from now on (submit keeps it; the reader's gate takes over), and
                # dropped if the task is cancelled before it reads it
                state.unanswered = True

                def dropped(done: asyncio.Task[None]) -> None:
                    exchange.abort()
                    state.answered(done)

                state.on_task_done(dropped)
        except (BackendError, ConfigError) as exc:
            self.reader.failed(exc)
        except Exception:  # a bug must not reach :messages as a stack trace
            self.reader.internal_error()
        return True

    def _shown_from_cache(self, state: BufferState, snap: Snapshot, prep: Prepared) -> bool:
        """A suggestion (or its first part) the cache has for this spot, shown; False: none."""
        assert self.config is not None
        cached = self.cache.get(prep.key) if self.config.reuse else None
        if cached is None:
            return False
        self.stats.count("cache_hits")
        self._first_shown(state, snap, prep, Outcome(cached, cached, self.cache.is_partial(prep.key)), cached=True)
        return True

    def _first_shown(self, state: BufferState, snap: Snapshot, prep: Prepared, out: Outcome, *,
                     cached: bool = False) -> None:
        """A first part is in (`cached`: from the cache): show it, and continue it once the user
        pauses (a timer: a key typed before then cancels it for nothing), or it is all."""
        if out.truncated and prep.req.n_predict > self._first_n():
            if not cached:
                self.cache.put(prep.key, out.text, partial=True)
            if out.text:  # nothing to show yet (a stream's drawer would not draw it either)
                self.editor.show(self._plan(snap, [out.text], final=False))
            state.pause = asyncio.get_running_loop().call_at(
                state.typing.pause_end(), self._continue, state, snap, prep, out)
            return
        self.cache.put(prep.key, out.text)
        self.editor.show(self._plan(snap, [out.text], final=True, cached=cached))
        self._quiet(out)
        self._finished(state, snap, out.text)

    def _quiet(self, out: Outcome) -> None:
        """Counts an answer that post-processing left nothing of (it only repeated the line
        above or the text after the cursor, or was blank): shown as nothing."""
        if not out.text and out.raw.strip():
            self.stats.count("quiet")

    def _continue(self, state: BufferState, snap: Snapshot, prep: Prepared, first: Outcome) -> None:
        state.pause = None
        state.start(self._run_rest(state, snap, prep, first))

    # how long a request after a cancelled one waits for the server to let go of the buffer's
    # slot: a token or two on a CPU; a slot still evaluating a long prompt is not waited out
    SLOT_WAIT_S = 0.15

    async def _run(self, state: BufferState, snap: Snapshot, prep: Prepared | None = None,
                   exchange: Exchange | None = None, *, after_cancel: bool = False) -> None:
        drawer = _Drawer(self, snap)
        try:
            slot = self.prompts.slots.of(snap.buf)
            if after_cancel and slot is not None and self.backend is not None:
                # the cancelled request runs on in its slot until the server notices its closed
                # stream; sent now, this one would get another slot, whose cache holds nothing
                # of this prompt
                await self.backend.slot_idle(slot, self.SLOT_WAIT_S)
            await self._suggest(state, snap, drawer, prep, exchange)
        except Superseded:
            pass
        except Exception:  # a bug (e.g. probing the server) must be said: a task's own is never read
            self.reader.internal_error()
        finally:
            self._settle(state, drawer)

    async def _run_rest(self, state: BufferState, snap: Snapshot, prep: Prepared, first: Outcome) -> None:
        """The rest of a suggestion after its first part, once the user paused."""
        drawer = _Drawer(self, snap)
        drawer.shown, drawer.drawn = first.text, True
        try:
            more = self._continuation(prep.req, first.raw)
            self.stats.count("continuations")
            out = await self.reader.stream(prep, drawer.on_text, more, base_raw=first.raw, gate=state)
            if out is None:  # broken half-way: the part shown is not to be accepted
                self.editor.show(self._plan(snap, [""], final=True))
                return
            self.cache.put(prep.key, out.text)
            self.editor.show(self._plan(snap, [out.text], final=True))
            self._quiet(out)
            self._finished(state, snap, out.text)
        except Superseded:
            pass
        finally:
            self._settle(state, drawer)

    def _settle(self, state: BufferState, drawer: _Drawer) -> None:
        """A request task ends: a snapshot that waited for its answer goes next."""
        drawer.stop()
        if not state.owns(asyncio.current_task()):
            # cancelled, and wound down only now: a newer request owns the buffer, and a
            # snapshot waiting for that one's answer is its to send (it was dropped here)
            return
        newer, state.waiting = state.waiting, None
        if newer is not None:
            self.stats.count("cancels")
            state.start(self._run(state, newer, after_cancel=True))

    async def _suggest(self, state: BufferState, snap: Snapshot, drawer: _Drawer, prep: Prepared | None = None,
                       exchange: Exchange | None = None) -> None:
        """`prep`: the snapshot already prepared; `exchange`: its first request (counted, the
        cache looked up), maybe sent already."""
        assert self.config is not None
        for attempt in (1, 2):
            if prep is None:
                try:
                    prep = await self._prepare(snap)
                except (BackendError, ConfigError) as exc:
                    self.reader.failed(exc, counted=False)
                    return
            if exchange is None and self._shown_from_cache(state, snap, prep):
                return
            if exchange is None:
                self.stats.count("requests")
                req = self._first_request(prep.req)
            else:
                req = exchange.req
            try:
                out = await self.reader.stream(prep, drawer.on_text, req, retry_overflow=attempt == 1, gate=state,
                                         exchange=exchange)
            except PromptTooLong:
                prep, exchange = None, None
                continue  # the estimator now knows the server's count: fit again
            break
        else:
            return
        if out is None:
            if drawer.drawn:  # a stream that broke half-way: its partial text is not to be accepted
                self.editor.show(self._plan(snap, [""], final=True))
            return
        drawer.stop()
        self._first_shown(state, snap, prep, out)

    def _finished(self, state: BufferState, snap: Snapshot, text: str) -> None:
        state.last = (snap, text)
        cfg = self.config
        if not text or cfg is None or not cfg.speculate:
            return
        self._unaccepted += 1
        if self._unaccepted > self.SPECULATE_UNACCEPTED:
            return
        state.speculative = asyncio.get_running_loop().create_task(self._speculate(snap, text))

    async def _speculate(self, snap: Snapshot, text: str) -> None:
        """Compute the suggestion that follows `text`, as if it were accepted; cache only."""
        spec = accepted_snapshot(snap, text)
        if self.privacy.policy.refusal(spec.path, spec.lines) is not None:  # the model's text holds a credential
            return
        try:
            prep = await self._prepare(spec, speculative=True)
        except (BackendError, ConfigError):
            return
        if self.cache.get(prep.key) is not None:
            return
        self.stats.count("speculative")
        # only the quick first part: it is shown at once after accept, and continued from
        # there once the user pauses (a whole n_predict here would make the server generate
        # a full answer per suggestion that the user may never take)
        first = self._first_n()
        req = self._first_request(prep.req)
        got: Outcome | None = None
        exchange = self.backend.exchange_now(req) if self.backend is not None else None
        if exchange is not None:  # without the stream's async layers
            try:
                got = self.reader.answer_now(prep, exchange)
            except (BackendError, ConfigError) as exc:
                self.reader.failed(exc)
                return
            except Exception:  # a bug must not reach :messages as a stack trace
                self.reader.internal_error()
                return
        out = got if got is not None else await self.reader.stream(prep, req=req, exchange=exchange)
        if out is not None:
            self.cache.put(prep.key, out.text, partial=out.truncated and first < prep.req.n_predict)

    async def _run_alternatives(self, state: BufferState, snap: Snapshot) -> None:
        assert self.backend is not None
        try:
            prep = await self._prepare(snap)
        except (BackendError, ConfigError) as exc:
            self.reader.failed(exc, counted=False)
            return
        texts: list[str] = []
        last = state.last
        if last and last[0].tick == snap.tick and last[0].row == snap.row and last[0].col == snap.col and last[1]:
            texts.append(last[1])
        else:
            cached = self.cache.get(prep.key)
            if cached:
                texts.append(cached)
        wanted = self.ALTERNATIVES
        base = _with(prep.req, temperature=self.ALT_TEMPERATURE)
        if self.backend.supports_n:
            reqs = [_with(base, n=wanted, seed=1)]
        else:
            reqs = [_with(base, seed=i + 1) for i in range(wanted)]
        for req in reqs:
            self.stats.count("requests")
            if req.n > 1:
                for text in await self.reader.stream_many(prep, req):
                    if text and text not in texts:
                        texts.append(text)
            else:
                out = await self.reader.stream(prep, req=req)
                if out is None:
                    return
                if out.text and out.text not in texts:
                    texts.append(out.text)
        self.editor.show(self._plan(snap, texts, final=True))

def _with(req: FimRequest, **changes: object) -> FimRequest:
    return msgspec.structs.replace(req, **changes)
