"""The reading of one answer: a completion's chunks, streamed or in one piece, become a
`Completion`.

Per answer: the cap on chunks (a server that ignores n_predict cannot stream forever), the
post-processing passes, the server's counters (its speeds and the prompt's size, told as one
event, `learn`, to whoever fits the prompts: said.py; the slot that ran it, to the backend's
slots), the latency stats, and what the answer says about the server (its
failure message, one per episode, and the backend state the editor shows). What to ask for is
the pipeline's (complete.py); when to ask is each surface's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable

from ..backends import Backend, Chunk, FimRequest
from ..errors import BackendError, ConfigError, ModelLoading, ServerError, ServerHeld, ServerUnavailable
from ..log import log
from ..notify import EpisodeNotifier
from ..stats import Stats
from ..transport.exchange import Exchange
from ..updates import BackendState, Editor
from .placing import Placing
from .postprocess import Result, process
from .prepare import Prepared
from .said import Overflow, PromptSize, Said, Speed

__all__ = ["Completion", "PromptTooLong", "Reader", "Stop"]


class PromptTooLong(Exception):
    """The server refused the prompt as too long; the estimator was recalibrated, retry once."""


class Stop(Exception):
    """Raised by a caller's callback (`on_text`, `on_answer`) to abandon the completion: it
    propagates out of `complete()` as it is."""


class Completion:
    """What one completion gave: the post-processed `text` (`texts` when several candidates
    were asked for), the model's `raw` text, why it stopped (`stop`: "end" — the model or the
    post-processor ended it; "length" — the token limit cut it, there is more to ask for;
    "error" — `error` says why), whether it is a first part a continuation can follow
    (`continuable`), whether the cache answered, the seconds to the first token and to the end,
    what was prepared from the snapshot and the request sent (None when cached)."""

    __slots__ = ("text", "texts", "raw", "stop", "error", "cached", "continuable", "first_s", "total_s", "prepared",
                 "sent")

    def __init__(self, text: str, raw: str, stop: str, *, prepared: Prepared | None = None,
                 sent: FimRequest | None = None, cached: bool = False, error: Exception | None = None,
                 texts: list[str] | None = None, first_s: float = 0.0, total_s: float = 0.0) -> None:
        self.text, self.raw, self.stop, self.error, self.cached = text, raw, stop, error, cached
        self.continuable = False  # (the pipeline knows: complete.py)
        self.texts = texts if texts is not None else [text]
        self.first_s, self.total_s = first_s, total_s
        self.prepared, self.sent = prepared, sent

    @property
    def truncated(self) -> bool:
        """The token limit cut it off: there is more to fetch."""
        return self.stop == "length"

    def __repr__(self) -> str:
        return f"Completion({self.text!r}, stop={self.stop!r}, cached={self.cached})"


async def _one(chunk: Chunk) -> AsyncGenerator[Chunk, None]:
    """A whole answer read already, as the stream it would have been."""
    yield chunk


def failure(exc: Exception, prepared: Prepared | None = None, sent: FimRequest | None = None) -> Completion:
    return Completion("", "", "error", prepared=prepared, sent=sent, error=exc)


class Reader:
    """Reads the answers of the ghost-text backend (`configure` names it) and reports on them."""

    def __init__(self, editor: Editor, learn: Callable[[Said], None], stats: Stats,
                 notifier: EpisodeNotifier, start_hint: Callable[[str], str | None] | None = None) -> None:
        self.editor = editor
        # how the surface starts a backend's server that nothing answers for (Neovim:
        # :LocalCopilotBackend start NAME), said with the first failure to reach it
        self.start_hint = start_hint
        # what the answers say of the server's speed and of the prompts' size (said.py): the
        # estimates the next prompts are fitted with (Preparer.learn)
        self.learn = learn
        self.stats = stats
        self.notifier = notifier  # the backend's failure messages, one per episode
        self.backend: Backend | None = None
        self._loading = False  # the status says the server is loading the model
        # each buffer's first request read on after it was superseded (placing.py)
        self._placing: dict[int, Placing] = {}

    def configure(self, backend: Backend, notifier: EpisodeNotifier) -> None:
        self.backend = backend
        self.notifier = notifier
        self._loading = False
        self._placing = {}

    async def read(self, prep: Prepared, req: FimRequest, *, on_text: Callable[[str], None] | None = None,
                   on_answer: Callable[[], bool | None] | None = None, base_raw: str = "",
                   retry_overflow: bool = False, quiet: bool = False, report_failure: bool = True) -> Completion:
        """Send `req` and read its answer through the post-processor.

        `base_raw` is model text a continuation request carries in its prompt: the answer's
        text is appended to it before post-processing. `on_answer` runs when the server's first
        chunk arrives (before any text is drawn) and returns True when the caller no longer wants
        the answer (it is then abandoned: Stop), `on_text` with each new partial text. `quiet`:
        the server's state is not reported (a warm-up: the next real request reports it);
        `report_failure` False: a failure is not (the caller reports it, or falls back).
        Raises PromptTooLong (with `retry_overflow`), Stop, CancelledError."""
        backend = self.backend
        assert backend is not None
        raw = base_raw
        started = time.perf_counter()
        first_token: float | None = None
        exchange: Exchange | None = None
        stream: AsyncGenerator[Chunk, None] | None = None
        # A server that ignores n_predict (or a broken proxy) can stream forever; every backend
        # sends about one token per chunk, so past n_predict chunks (plus slack) stop reading:
        # closing the stream stops the server, and the text so far is the suggestion
        # (tests/integration/test_faults.py, endless stream).
        max_chunks = req.n_predict + 16
        chunks = 0
        generated: float | None = None  # tokens, as the server counts them
        ended = False  # the post-processor found the suggestion complete
        last: Result | None = None  # the final pass over the server's whole answer
        answered = False
        # the client's own clock times servers that do not say how long they took (vLLM's
        # usage has the counts only); a request that waited on probing the server first would
        # read as a slow prompt
        clock = backend.caps.clock_timed and backend.caps.probed
        try:
            exchange = await backend.exchange(req)  # probes the server first if need be
            whole = exchange.answer_now()
            stream = exchange.chunks() if whole is None else _one(whole)
            buf = prep.snap.buf
            if whole is None and req.slot is None and backend.caps.places_in_slots and backend.slots.of(buf) is None:
                stream, exchange = self._place(buf, stream, exchange), None  # (the placing closes the exchange)
            async for chunk in stream:
                if not answered:
                    # the server answers: say so before its text is drawn (a fresh suggestion
                    # next to a "backend down" status, even for a moment, reads as a lie)
                    answered = True
                    if not quiet:
                        self.succeeded()
                    if on_answer is not None and on_answer():
                        raise Stop()  # (a newer request of the caller's waited for this answer to start)
                text = chunk.text
                if text:
                    count = len(chunk.parts) or 1
                    if chunk.parts and chunks + count > max_chunks:  # merged events past the limit
                        text = "".join(chunk.parts[:max_chunks - chunks])
                        count = max_chunks - chunks
                    chunks += count
                if chunk.timings or chunk.prompt_tokens or chunk.slot is not None:
                    timed = (started, first_token or time.perf_counter()) if clock else None
                    said = self._account(req, chunk, prep.snap.buf, timed)
                    if said is not None:
                        generated = said
                if text and first_token is None:
                    first_token = time.perf_counter()
                raw += text
                if chunk.more and not chunk.done and chunks < max_chunks:
                    continue  # the rest of this network read comes at once: process it all together
                # the server's last chunk gets the final pass only: it is what is shown and
                # kept, and a non-final pass first cost as much again on every keystroke
                result = process(raw, prep.pctx, final=chunk.done)
                if chunk.done:
                    last = result
                if result.done:
                    ended = True
                if chunk.done or result.done or chunks >= max_chunks:
                    break  # the caller shows the completion: a draw of it here would be a second
                if on_text is not None:
                    on_text(result.text)
        except (asyncio.CancelledError, Stop):
            raise
        except (BackendError, ConfigError) as exc:
            if isinstance(exc, ServerError) and exc.context_overflow and retry_overflow:
                self.learn(Overflow(req, exc.prompt_tokens, exc.context_tokens))
                log.info("prompt too long for the server (%s); fitting it again", exc)
                raise PromptTooLong() from None
            backend.slots.forget(prep.snap.buf)  # the server may have restarted
            if quiet or not report_failure:
                log.debug("request failed: %s", exc)
            else:
                self.failed(exc)
            return failure(exc, prep, req)
        except Exception as exc:  # a bug must not reach :messages as a stack trace
            self.internal_error()
            return failure(exc, prep, req)
        finally:
            if stream is not None:
                await stream.aclose()
            if exchange is not None:
                exchange.abort()  # (a stream never started cannot close what it left in flight)
        done = time.perf_counter()
        if not answered and not quiet:  # an empty answer is an answer too
            self.succeeded()
        final = (last or process(raw, prep.pctx, final=True)).text
        first_s, total_s = (first_token or done) - started, done - started
        if not quiet:
            self.stats.latency(backend.name, first_s, total_s, len(raw) - len(base_raw))
        log.debug("completion done in %.1f ms: %d chars", total_s * 1000, len(final))
        cut = not ended and (generated if generated is not None else chunks) >= req.n_predict
        return Completion(final, raw, "length" if cut else "end", prepared=prep, sent=req,
                          first_s=first_s, total_s=total_s)

    async def read_many(self, prep: Prepared, req: FimRequest) -> Completion:
        """One request with n candidates (OpenAI `n`), each post-processed on its own."""
        backend = self.backend
        assert backend is not None
        raws = [""] * req.n
        stream = backend.complete(req)
        # a server that ignores max_tokens must not hold next()/prev() open: as in read()
        max_chunks, chunks = req.n * (req.n_predict + 16), 0
        try:
            async for chunk in stream:
                if 0 <= chunk.index < req.n:
                    raws[chunk.index] += chunk.text
                chunks += len(chunk.parts) or 1
                if chunk.done or chunks >= max_chunks:
                    break
        except (BackendError, ConfigError) as exc:
            self.failed(exc)
            return failure(exc, prep, req)
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        self.succeeded()
        texts = [process(raw, prep.pctx, final=True).text for raw in raws]
        return Completion(texts[0], raws[0], "end", prepared=prep, sent=req, texts=texts)

    def stop_placing(self) -> list[asyncio.Task[None]]:
        """Stop the requests still read for their slot (the host stops): their tasks, which
        close their streams once they run again."""
        tasks = [placing.stop() for placing in self._placing.values()]
        self._placing = {}
        return tasks

    def _place(self, buf: int, stream: AsyncGenerator[Chunk, None], exchange: Exchange) -> AsyncGenerator[Chunk, None]:
        """`buf`'s request that names no slot, read through a Placing (placing.py) until the
        server says where it ran."""
        assert self.backend is not None
        slots = self.backend.slots  # (this server's: another one's starts empty)
        placing = Placing(stream, exchange, lambda slot: slots.learn(buf, slot))
        self._placing[buf] = placing

        def ended(_: object) -> None:
            if self._placing.get(buf) is placing:
                del self._placing[buf]

        placing.done.add_done_callback(ended)
        return placing.chunks()

    async def placed(self, buf: int) -> None:
        """Once `buf`'s next request can name its slot: a slot is chosen for a buffer that has
        run no request here (backends/slots.py), or the server has said where the buffer's
        request that named none runs, or that one was given up on (placing.py). Such a request
        still being read with text coming is not waited for (its reader is showing it). After a
        pause, the buffer's slot is checked against `/slots` (another editor may have emptied it)."""
        placing = self._placing.get(buf)
        if placing is not None and placing.waits_for_slot:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(placing.done), Placing.MAX_S)
        backend = self.backend
        if placing is not None or backend is None or not backend.caps.places_in_slots:
            return
        slots = backend.slots
        choose = not slots.known(buf)
        if choose or slots.to_check(buf, time.monotonic()):
            await asyncio.sleep(0)  # a turn of the loop first: httpx waits in a task (this may run eagerly, eager.py)
            states = await backend.slot_states()
            if states is not None:
                if choose:
                    slots.choose(buf, states)
                else:
                    slots.check(buf, states)

    def _account(self, req: FimRequest, chunk: Chunk, buf: int,
                 timed: tuple[float, float] | None = None) -> float | None:
        """The server's counters on a chunk of `buf`'s request: its speed, the prompt's size in
        tokens (for the estimator), the slot that ran it. `timed`: when the request was sent
        and its first token came, for a server whose counters carry no times. Returns the
        tokens it generated, when it says."""
        assert self.backend is not None
        generated = None
        if chunk.slot is not None:
            self.backend.slots.learn(buf, chunk.slot)
        if chunk.timings and "prompt_ms" not in chunk.timings and timed is not None:
            sent, first = timed
            now = time.perf_counter()
            self.learn(Speed({**chunk.timings, "prompt_ms": (first - sent) * 1000.0,
                              "predicted_ms": (now - first) * 1000.0}, client_timed=True))
        elif chunk.timings:
            self.learn(Speed(chunk.timings))
        if chunk.timings and "predicted_n" in chunk.timings:
            generated = chunk.timings["predicted_n"]
        if chunk.prompt_tokens and self.backend.caps.counts_full_prompt:
            self.learn(PromptSize(req, chunk.prompt_tokens))
        return generated

    # -- what an answer says about the server ----------------------------------------------

    def failed(self, exc: Exception, *, counted: bool = True) -> None:
        """A request failed. `counted`: it was counted in the stats' requests already (False:
        it failed before its completion request went out, e.g. probing the server; it counts
        as a request here, so the errors are never more than the requests)."""
        if isinstance(exc, ModelLoading):
            # nothing was sent: the server is loading the model (router mode); the status says
            # so until a request is answered, and Lua asks again meanwhile
            self._loading = True
            self.editor.update(BackendState(state="loading", message=exc.model))
            return
        if isinstance(exc, ServerHeld):
            # nothing was sent: the server asked to wait, and the failure that said so was
            # counted and told already; the status says until when
            self.editor.update(BackendState(state="held", message=repr(exc.until)))
            return
        if not counted:
            self.stats.count("requests")
        self.stats.count("errors")
        if isinstance(exc, ServerError) and exc.context_overflow:
            # the prompt did not fit even after fitting it again: count more pessimistically.
            # The server answers, so the status does not say it is down; the next request is
            # cut shorter
            self.learn(Overflow(None, None, exc.context_tokens))
            log.warning("%s", exc)
            self.notifier.failure(type(exc).__name__, f"local-copilot: the prompt was too long for the server's "
                                  f"context ({exc}); the next requests are cut shorter")
            return
        wait = getattr(exc, "retry_after", None)
        until = time.time() + wait if wait else None
        message = str(exc)
        if isinstance(exc, ServerUnavailable) and exc.unreachable and exc.backend and self.start_hint is not None:
            hint = self.start_hint(exc.backend)
            if hint:
                message += f"; {hint}"
        if until is not None:
            message += f"; no requests to it until {time.strftime('%H:%M:%S', time.localtime(until))} (its Retry-After)"
        log.warning("%s", message)
        # the state first: a statusline reads 'backend down' by the time the message is shown
        if until is not None:
            self.editor.update(BackendState(state="held", message=repr(until)))
        else:
            self.editor.update(BackendState(state="down", message=str(exc)))
        self.notifier.failure(type(exc).__name__, f"local-copilot: {message}")

    def succeeded(self) -> None:
        if self.notifier.in_episode or self._loading:
            self._loading = False
            self.editor.update(BackendState(state="ok", message=""))
        self.notifier.success()

    def internal_error(self) -> None:
        self.stats.count("errors")
        log.exception("completion request failed")
        self.notifier.failure("internal", "local-copilot: internal error, see the log (:LocalCopilot log)", "error")
