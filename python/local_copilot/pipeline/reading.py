"""The reading of one answer: a completion's chunks, streamed or in one piece, become the text
the engine shows.

Per answer: the cap on chunks (a server that ignores n_predict cannot stream forever), the
post-processing passes, the server's counters (its speed per generated token, the prompt's size
for the estimator), the latency stats, and what the answer says about the server (its failure
message, one per episode, and the backend state the editor shows). What to ask for and when is
the engine's (engine.py): it reads each answer through its `Reader` and asks the reader how
fast the server writes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable
from typing import Protocol

from ..backends import Backend, Chunk, FimRequest
from ..backends.exchange import Exchange
from ..buffer_state import BufferState
from ..errors import BackendError, ConfigError, ServerError, ServerHeld
from ..log import log
from ..notify import EpisodeNotifier
from .postprocess import Result, process
from ..prompt.prepare import Prepared, Preparer
from ..stats import Stats

__all__ = ["BackendStateShown", "Outcome", "PromptTooLong", "Reader", "Superseded"]


class BackendStateShown(Protocol):
    def backend_state(self, state: str, message: str) -> None: ...


class PromptTooLong(Exception):
    """The server refused the prompt as too long; the estimator was recalibrated, retry once."""


class Superseded(Exception):
    """A newer snapshot waited for this request's answer to start; this one is stale."""


class Outcome:
    """One finished stream: the post-processed text, the raw model text, and whether the
    model was cut off by the token limit (so there is more to fetch)."""

    __slots__ = ("text", "raw", "truncated")

    def __init__(self, text: str, raw: str, truncated: bool) -> None:
        self.text, self.raw, self.truncated = text, raw, truncated


class Reader:
    """Reads the answers of the ghost-text backend (`configure` names it) and reports on them."""

    def __init__(self, editor: BackendStateShown, prompts: Preparer, stats: Stats,
                 notifier: EpisodeNotifier) -> None:
        self.editor = editor
        self.prompts = prompts  # the server's counters go to its speed and estimator
        self.stats = stats
        self.notifier = notifier  # the backend's failure messages, one per episode
        self.backend: Backend | None = None
        # ms the server takes per generated token (smoothed; from its timings), None until known
        self.token_ms: float | None = None
        self.last_failure: Exception | None = None  # the last request's error, as raised (for the CLI)

    def configure(self, backend: Backend, notifier: EpisodeNotifier) -> None:
        """A new server: its speed is not known yet."""
        self.backend = backend
        self.notifier = notifier
        self.token_ms = None

    async def stream(self, prep: Prepared, on_text: Callable[[str], None] | None = None,
                     req: FimRequest | None = None, *, base_raw: str = "",
                     retry_overflow: bool = False, gate: BufferState | None = None,
                     exchange: Exchange | None = None) -> Outcome | None:
        """Run one streaming request through the post-processor; None when it failed.

        `base_raw` is model text a continuation request carries in its prompt: the stream's
        text is appended to it before post-processing. With `gate` (the buffer's state), the
        buffer counts as unanswered until the first chunk, and a snapshot that came meanwhile
        supersedes it. `exchange`: `req`'s exchange, made already (maybe sent: answer_now)."""
        assert self.backend is not None
        req = req or prep.req
        raw = base_raw
        started = time.perf_counter()
        first_token: float | None = None
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
        gated = gate is not None  # until the first chunk
        if gate is not None:
            gate.unanswered = True
        answered = False
        try:
            if exchange is None:
                exchange = await self.backend.exchange(req)  # probes the server first if need be
            stream = exchange.chunks()
            async for chunk in stream:
                if not answered:
                    # the server answers: say so before its text is drawn (a fresh suggestion
                    # next to a "backend down" status, even for a moment, reads as a lie)
                    answered = True
                    self.succeeded()
                if gated and gate is not None:
                    gated = False
                    gate.unanswered = False
                    if gate.waiting is not None:
                        raise Superseded()
                text = chunk.text
                if text:
                    count = len(chunk.parts) or 1
                    if chunk.parts and chunks + count > max_chunks:  # merged events past the limit
                        text = "".join(chunk.parts[:max_chunks - chunks])
                        count = max_chunks - chunks
                    chunks += count
                if chunk.timings or chunk.prompt_tokens or chunk.slot is not None:
                    said = self._account(req, chunk, prep.snap.buf)
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
                    break  # the caller shows the outcome: a draw of it here would be a second
                if on_text is not None:
                    on_text(result.text)
        except (asyncio.CancelledError, Superseded):
            raise
        except (BackendError, ConfigError) as exc:
            if isinstance(exc, ServerError) and exc.context_overflow and retry_overflow:
                self.prompts.overflowed(req, exc.prompt_tokens)
                log.info("prompt too long for the server (%s); fitting it again", exc)
                raise PromptTooLong() from None
            self.prompts.slots.forget(prep.snap.buf)  # the server may have restarted
            self.failed(exc)
            return None
        except Exception:  # a bug must not reach :messages as a stack trace
            self.internal_error()
            return None
        finally:
            # (a request cancelled for a newer one leaves that one's flag alone)
            if gated and gate is not None:
                gate.answered(asyncio.current_task())
            if stream is not None:
                await stream.aclose()
            if exchange is not None:
                exchange.abort()  # (a stream never started cannot close what it left in flight)
        done = time.perf_counter()
        if not answered:  # an empty answer is an answer too
            self.succeeded()
        final = (last or process(raw, prep.pctx, final=True)).text
        self.stats.latency(self.backend.name, (first_token or done) - started, done - started, len(raw) - len(base_raw))
        log.debug("completion done in %.1f ms: %d chars", (done - started) * 1000, len(final))
        truncated = not ended and (generated if generated is not None else chunks) >= req.n_predict
        return Outcome(final, raw, truncated)

    def answer_now(self, prep: Prepared, exchange: Exchange) -> Outcome | None:
        """Exchange.answer_now, its answer taken in as stream() takes a stream's: the outcome,
        or None (the exchange goes on in stream()). Raises BackendError."""
        backend = self.backend
        assert backend is not None
        req = exchange.req
        started = time.perf_counter()
        got = exchange.answer_now()
        if got is None:
            return None
        self.succeeded()
        generated = self._account(req, got, prep.snap.buf)
        result = process(got.text, prep.pctx, final=True)
        done = time.perf_counter()
        self.stats.latency(backend.name, done - started, done - started, len(got.text))
        count = generated if generated is not None else int(bool(got.text))
        return Outcome(result.text, got.text, not result.done and count >= req.n_predict)

    async def stream_many(self, prep: Prepared, req: FimRequest) -> list[str]:
        """One request with n candidates (OpenAI `n`), each post-processed on its own."""
        assert self.backend is not None
        raws = [""] * req.n
        stream = self.backend.complete(req)
        # a server that ignores max_tokens must not hold next()/prev() open: as in stream()
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
            return []
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        self.succeeded()
        return [process(raw, prep.pctx, final=True).text for raw in raws]

    def _account(self, req: FimRequest, chunk: Chunk, buf: int) -> float | None:
        """The server's counters on a chunk of `buf`'s request: its speed, the prompt's size in
        tokens (for the estimator), the slot that ran it. Returns the tokens it generated, when
        it says."""
        assert self.backend is not None
        generated = None
        if chunk.slot is not None:
            self.prompts.slots.learn(buf, chunk.slot)
        if chunk.timings:
            self.prompts.speed.observe(chunk.timings)
        if chunk.timings and "predicted_n" in chunk.timings:
            generated = chunk.timings["predicted_n"]
            self._observe_speed(chunk.timings)
        if chunk.prompt_tokens and self.backend.counts_full_prompt:
            self.prompts.observe(req, chunk.prompt_tokens)
        return generated

    def _observe_speed(self, timings: dict[str, float]) -> None:
        n, ms = timings.get("predicted_n"), timings.get("predicted_ms")
        if n and ms and n >= 2:
            per = ms / n
            self.token_ms = per if self.token_ms is None else 0.7 * self.token_ms + 0.3 * per

    # -- what an answer says about the server ----------------------------------------------

    def failed(self, exc: Exception, *, counted: bool = True) -> None:
        """A request failed. `counted`: it was counted in the stats' requests already (False:
        it failed before its completion request went out, e.g. probing the server; it counts
        as a request here, so the errors are never more than the requests)."""
        self.last_failure = exc
        if isinstance(exc, ServerHeld):
            # nothing was sent: the server asked to wait, and the failure that said so was
            # counted and told already; the status says until when
            self.editor.backend_state("held", repr(exc.until))
            return
        if not counted:
            self.stats.count("requests")
        self.stats.count("errors")
        if isinstance(exc, ServerError) and exc.context_overflow:
            # the prompt did not fit even after fitting it again: count more pessimistically
            self.prompts.overflowed(None, None)
        wait = getattr(exc, "retry_after", None)
        until = time.time() + wait if wait else None
        message = str(exc)
        if until is not None:
            message += f"; no requests to it until {time.strftime('%H:%M:%S', time.localtime(until))} (its Retry-After)"
        log.warning("%s", message)
        self.notifier.failure(type(exc).__name__, f"local-copilot: {message}")
        if until is not None:
            self.editor.backend_state("held", repr(until))
        else:
            self.editor.backend_state("down", str(exc))

    def succeeded(self) -> None:
        if self.notifier.in_episode:
            self.editor.backend_state("ok", "")
        self.notifier.success()

    def internal_error(self) -> None:
        self.stats.count("errors")
        log.exception("completion request failed")
        self.notifier.failure("internal", "local-copilot: internal error, see the log (:LocalCopilot log)", "error")
