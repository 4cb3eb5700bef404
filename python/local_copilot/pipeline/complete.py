"""One completion: a snapshot in, the suggestion for it out.

`Pipeline.complete(snap, ask)` is what every surface awaits (ghost text, the CLI, and the
surfaces to come): the snapshot is prepared into a request that fits the server (prompt/), the
cache may answer, else the request goes out through its backend's exchange and the answer is
read through the post-processor (reading.py). What it returns is a `Completion`: the text, why
it stopped, the timings, what was prepared and sent, or the failure (already reported to the
user, once per episode, unless the ask is quiet).

A short answer from a fast server never suspends: the exchange waits for it in poll() for up
to a frame (transport/exchange.py), so `complete()` stepped once in the keystroke's own callback
(eager.py) returns the suggestion there, with no task or loop turn. When to ask, and what
(first parts, continuations, speculation, alternatives, warm-ups), is each surface's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import msgspec

from ..backends import Backend, FimRequest
from ..config import Config
from ..errors import BackendError, ConfigError, ServerUnavailable
from ..notify import Episodes
from ..prompt.context import build_context
from ..snapshot import Snapshot
from ..stats import Stats
from .cache import SuggestionCache, context_key
from .fallback import Chain, falls_back
from .postprocess import process
from .postprocess.context import Rules
from .prepare import Prepared, Preparer, post_context
from .reading import Completion, PromptTooLong, Reader, failure

__all__ = ["Ask", "Completion", "Pipeline"]


class Ask(msgspec.Struct, frozen=True, kw_only=True):
    """What a caller asks of one completion beyond its snapshot."""

    n_predict: int | None = None  # tokens to write; None: the configured n_predict
    # only the configured first part (n_predict_first tokens), where the server can continue a
    # completion (`after=`) and first parts are on; else all of n_predict
    first_part: bool = False
    # asked for as one answer instead of a stream when the server, at its measured speed,
    # writes all of it within this long of its first token (0: always streamed)
    whole_within_s: float = 0.0
    temperature: float | None = None  # sampling (alternatives); None: the server's default
    seed: int | None = None
    n: int = 1  # candidates, in one request where the server can, else one request each
    # the snapshot after an accept, not the one the user types in: its window is fitted apart
    speculative: bool = False
    cached: bool = True  # the cache may answer, and keeps what comes
    # the server's state is not reported (a warm-up: the next real request reports it)
    quiet: bool = False
    # which post-processing rules run (postprocess/context.py): a measurement turns them off
    post: Rules = "all"


_DEFAULT = Ask()


class NotAnswering(ServerUnavailable):
    """The server took a request and has not started answering it within the fallback's time."""


def _why(exc: Exception, after_s: float) -> str:
    if isinstance(exc, NotAnswering):
        return f"has not started answering within {after_s * 1000:.0f} ms"
    return f"cannot answer ({exc})"


class Pipeline:
    """Completions from the configured backend, with what they learn kept between them: the
    fitted prompts and the server's speeds (`prompts`), the suggestions (`cache`), the reading
    and what it says about the server (`reader`)."""

    # a whole answer awaited within this long is awaited in poll() before the event loop
    # (Exchange.QUICK_ANSWER_S): longer ones are awaited through the loop
    QUICK_S = 0.016

    def __init__(self, prompts: Preparer, reader: Reader, stats: Stats, episodes: Episodes) -> None:
        self.prompts = prompts
        self.reader = reader
        self.stats = stats
        self.episodes = episodes  # each entry's failure messages, one per episode
        self.cache = SuggestionCache()
        self.config: Config | None = None
        self.backend: Backend | None = None  # the entry that answers now
        self.chain: Chain | None = None  # the entries to fall back on, when the user named any
        self._entries: list[Backend] = []  # every backend configured (closed together)
        # continuations running, by first part (the cache key and the first part's model text)
        self._continuing: dict[tuple[str, str], asyncio.Future[Completion]] = {}

    def configure(self, cfg: Config, backend: Backend, fallbacks: Sequence[tuple[str, Backend]] = ()) -> None:
        """The active entry's `backend`, and the `fallback` entries' in order (the pipeline
        owns them all from now on: the ones before are closed)."""
        self.close()
        self.config = cfg
        self._entries = [backend, *(b for _, b in fallbacks)]
        self.chain = (Chain([(cfg.backend, backend), *fallbacks], cfg.fallback_after_ms / 1000,
                            self.episodes.send, self._use, self._answers_in_time) if fallbacks else None)
        self._asked: Snapshot | None = None  # the last snapshot completed (the chain's probes ask it)
        self._use(cfg.backend, backend)

    def _use(self, name: str, backend: Backend) -> None:
        """`backend` (entry `name`) answers from now on: what was learnt of another starts over."""
        self.backend = backend
        self.reader.configure(backend, self.episodes.of(name))
        self.prompts.new_server()  # bytes per token and speeds differ between servers (each backend keeps its slots)
        self.cache.clear()
        self.stats.set_backend(name)

    def close(self) -> None:
        """Drop the backends' kept connections (replaced, or the host stops)."""
        if self.chain is not None:
            self.chain.close()
        for backend in self._entries:
            backend.close()
        self._entries = []

    def internal_error(self) -> None:
        """A bug in a caller's handling of a completion (a task's own exception is never read):
        said once per episode, its details in the log."""
        self.reader.internal_error()

    async def complete(self, snap: Snapshot, ask: Ask = _DEFAULT, *, after: Completion | None = None,
                       on_text: Callable[[str], None] | None = None,
                       on_answer: Callable[[], bool | None] | None = None) -> Completion:
        """The completion at `snap`'s cursor. `after`: a completion cut off by its token limit,
        continued (its prompt plus its text; only the new tokens are evaluated). `on_text` gets
        each partial text of a streamed answer (it may raise reading.Stop to abandon the
        completion), `on_answer` runs when the server starts answering and returns True to
        abandon it."""
        backend, cfg = self.backend, self.config
        assert backend is not None and cfg is not None, "complete() before configure()"
        if after is not None:
            return await self._continue(after, ask, on_text, on_answer)
        chain = self.chain
        if chain is None or ask.quiet:
            return await self._on(backend, cfg, snap, ask, on_text, on_answer)
        self._asked = snap
        chain.recheck()
        while True:
            if not chain.has_next():
                return await self._on(self.backend or backend, cfg, snap, ask, on_text, on_answer)
            out = await self._within(chain, cfg, snap, ask, on_text, on_answer)
            if out.stop != "error" or out.error is None or not falls_back(out.error):
                if out.stop == "error" and out.error is not None:
                    self.reader.failed(out.error, counted=out.sent is not None)
                return out
            # the entry's (stats are per backend); a request that failed before it went out
            # (probing the server) counts as one, so the errors are never more than the requests
            if out.sent is None:
                self.stats.count("requests")
            self.stats.count("errors")
            self.stats.count("fallbacks")
            chain.fall_back(_why(out.error, chain.after_s))

    async def _continue(self, after: Completion, ask: Ask, on_text: Callable[[str], None] | None,
                        on_answer: Callable[[], bool | None] | None) -> Completion:
        """The rest of `after`, a first part. Ghost text continues it once the user pauses and
        a completion menu asked at the same place continues it too: one continuation serves
        both (a second caller waits for the one running, or takes the whole text the cache kept
        of one that ended), so the server writes the rest once. A caller that joins gets the
        whole answer at its end, not its partial texts."""
        prep = after.prepared
        assert prep is not None
        if ask.cached and self.config is not None and self.config.reuse:
            whole = self.cache.get(prep.key)
            if (whole is not None and not self.cache.is_partial(prep.key) and whole.startswith(after.text)
                    and whole != after.text):
                return Completion(whole, whole, "end", prepared=prep, cached=True)
        if ask.n_predict is None and self.config is not None:
            # the rest of n_predict, after the first part's (a cached one says no request)
            cfg = self.config
            ask = msgspec.structs.replace(
                ask, n_predict=cfg.n_predict - (after.sent.n_predict if after.sent is not None else cfg.n_predict_first))
        key = (prep.key, after.raw)
        running = self._continuing.get(key)
        if running is not None:
            try:
                return await asyncio.shield(running)
            except asyncio.CancelledError:
                if not running.cancelled():
                    raise  # this caller was cancelled
                # the one it waited for was cancelled (its user typed on): ask for it here
        ours: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._continuing[key] = ours
        try:
            req = self._in_slot(self._request(prep.req, ask, middle=prep.req.middle + after.raw), prep.snap.buf)
            out = await self.reader.read(prep, req, on_text=on_text, on_answer=on_answer, base_raw=after.raw,
                                         quiet=ask.quiet)
            self._keep(prep, out, ask, continued=True)
            ours.set_result(out)
            return out
        finally:
            if not ours.done():
                ours.cancel()
            if self._continuing.get(key) is ours:
                del self._continuing[key]

    async def _within(self, chain: Chain, cfg: Config, snap: Snapshot, ask: Ask,
                      on_text: Callable[[str], None] | None, on_answer: Callable[[], bool | None] | None) -> Completion:
        """_on() the entry that answers now, its start in time or late told to the chain; where
        one more late start makes the chain leave the entry, the request is cut at `after_s`
        (a later entry is there to ask), else a late answer is awaited. Its failures are not
        reported: the next entry answers instead, or the caller reports them."""
        # a turn of the loop first: the timeout below belongs to a task (this may have been
        # stepped eagerly, eager.py)
        await asyncio.sleep(0)
        backend = chain.backend
        loop = asyncio.get_running_loop()
        start, first = loop.time(), None
        try:
            async with asyncio.timeout(chain.after_s if chain.leaves_if_late() else None) as watchdog:
                def answered() -> bool | None:
                    nonlocal first
                    first = loop.time()
                    watchdog.reschedule(None)  # it answers: however long the rest takes
                    return on_answer() if on_answer is not None else None

                out = await self._on(backend, cfg, snap, ask, on_text, answered, report=False)
                if first is None and out.stop != "error" and not out.cached:
                    first = loop.time()  # (answered whole: its start was no later)
                return out
        except TimeoutError:
            return failure(NotAnswering(f"{chain.name}: no answer within {chain.after_s * 1000:.0f} ms"))
        finally:
            if first is not None:
                chain.timed(late=first - start > chain.after_s)
            elif loop.time() - start > chain.after_s:
                chain.timed(late=True)  # cut, failed or given up on late without an answer

    async def _answers_in_time(self, backend: Backend, within_s: float) -> bool:
        """Whether `backend` (an entry the chain left) starts answering the user's last request,
        one token of it, within `within_s`: what leaving it was judged on. Nothing of it is
        kept or shown."""
        snap, cfg = self._asked, self.config
        if snap is None or cfg is None:
            return True  # (nothing asked yet: being up is all there is to know)
        try:
            async with asyncio.timeout(within_s):
                # (the window fitted as for speculation: the user's own stays as it is)
                prep = await self._prepare(backend, cfg, snap, speculative=True)
                req = msgspec.structs.replace(prep.req, n_predict=1, stream=True, quick=False, slot=None)
                stream = backend.complete(req)
                try:
                    async for _ in stream:
                        return True
                finally:
                    await stream.aclose()  # type: ignore[attr-defined]  # (the server stops writing)
        except (TimeoutError, BackendError, ConfigError):
            pass
        return False

    async def _on(self, backend: Backend, cfg: Config, snap: Snapshot, ask: Ask,
                  on_text: Callable[[str], None] | None, on_answer: Callable[[], bool | None] | None, *,
                  report: bool = True) -> Completion:
        """The completion from `backend`, the entry that answers now. `report`: its failures
        are told to the user (once per episode)."""
        quiet = ask.quiet or not report
        if not backend.caps.probed:
            # a turn of the loop first: probing the server waits on it, in a task of its own
            # when this was stepped eagerly (eager.py)
            await asyncio.sleep(0)
        for attempt in (1, 2):
            try:
                prep = await self._prepare(backend, cfg, snap, speculative=ask.speculative)
            except (BackendError, ConfigError) as exc:
                if not quiet:
                    self.reader.failed(exc, counted=False)
                return failure(exc)
            if ask.post != "all":
                prep = Prepared(prep.snap, prep.ctx, prep.req, msgspec.structs.replace(prep.pctx, rules=ask.post),
                                prep.key)
            if ask.cached and cfg.reuse:
                text = self.cache.get(prep.key)
                if text is not None:
                    if not ask.speculative:
                        self.stats.count("cache_hits")
                    partial = self.cache.is_partial(prep.key)
                    kept = Completion(text, text, "length" if partial else "end", prepared=prep, cached=True)
                    kept.continuable = partial
                    return kept
            req = self._request(prep.req, ask)
            if backend is self.backend:  # (a fallback entry's slots are not the active server's)
                await self.reader.placed(snap.buf)
                req = self._in_slot(req, snap.buf)
            if req.n_predict and not ask.speculative:
                self.stats.count("requests")
            if req.n > 1:
                return await self.reader.read_many(prep, req)  # (never continued)
            try:
                out = await self.reader.read(prep, req, on_text=on_text, on_answer=on_answer,
                                             retry_overflow=attempt == 1, quiet=ask.quiet,
                                             report_failure=report)
            except PromptTooLong:
                continue  # the estimator now knows the server's count: fit again
            self._keep(prep, out, ask)
            return out
        raise AssertionError("unreachable: the second attempt does not retry")

    async def cached(self, snap: Snapshot) -> str | None:
        """What the cache holds for `snap`'s spot, without asking the server."""
        backend, cfg = self.backend, self.config
        assert backend is not None and cfg is not None
        try:
            prep = await self._prepare(backend, cfg, snap)
        except (BackendError, ConfigError):
            return None
        return self.cache.get(prep.key)

    async def _prepare(self, backend: Backend, cfg: Config, snap: Snapshot, *, speculative: bool = False) -> Prepared:
        """`snap` as a request to `backend`, fit to its context. Raises what asking the server
        for its context raises (BackendError), and ConfigError when the context leaves no room."""
        caps = backend.caps
        if not caps.probed:
            caps = await backend.capabilities()  # (probes the server first)
        return self.prompts.prepare(snap, cfg, caps.context, caps.stop_strings, speculative=speculative, style=caps.style)

    def recheck(self, snap: Snapshot, text: str) -> str:
        """`text`, the rest of a suggestion the user typed part of, post-processed again for
        the line as it is now, and kept as the answer for this spot."""
        cfg, backend = self.config, self.backend
        assert cfg is not None
        ctx = build_context(snap, lines_before=cfg.context.lines_before, lines_after=cfg.context.lines_after)
        if backend is not None:
            text = process(text, post_context(snap, ctx, cfg, backend.stop_strings), final=True).text
        self.cache.put(context_key(ctx), text)
        return text

    def _request(self, base: FimRequest, ask: Ask, *, middle: str | None = None) -> FimRequest:
        """The request `ask` makes of `base`: its length, its sampling, and whether it is
        streamed (a short answer from a fast server comes whole: one read and one
        post-processing pass instead of one per network read)."""
        cfg, backend = self.config, self.backend
        assert cfg is not None and backend is not None
        n = cfg.n_predict if ask.n_predict is None else ask.n_predict
        whole_within_s = ask.whole_within_s
        if ask.first_part:
            # (a completion can be continued, `after=`, where the prompt ends with the start of
            # the middle: the same prompt plus the text so far asks for what follows)
            if backend.caps.continues and 0 < cfg.n_predict_first < n:
                n = cfg.n_predict_first
            else:
                whole_within_s = 0.0  # all of it, streamed as any answer of that length
        changes: dict[str, object] = {}
        if n != base.n_predict:
            changes["n_predict"] = n
        if middle is not None:
            changes["middle"] = middle
        if ask.temperature is not None:
            changes["temperature"] = ask.temperature
        if ask.seed is not None:
            changes["seed"] = ask.seed
        if ask.n != 1:
            changes["n"] = ask.n
        # whether the server, at its measured speed, writes the `n` tokens within
        # `whole_within_s` of the first
        tps = self.prompts.speed.gen_tps
        if n == 0:
            changes["stream"] = False  # the prompt evaluated, nothing written: nothing to stream
        elif whole_within_s > 0 and tps is not None and (n - 1) * 1000.0 / tps <= whole_within_s * 1000:
            self.stats.count("unstreamed")
            changes["stream"] = False
            changes["quick"] = whole_within_s <= self.QUICK_S
        return msgspec.structs.replace(base, **changes) if changes else base

    def _in_slot(self, req: FimRequest, buf: int) -> FimRequest:
        """`req` naming the server slot that holds `buf`'s prompt, once the server has placed
        one of its requests and while no request in another slot may have emptied it
        (backends/slots.py): every request of a buffer, warm-ups and speculation included, goes
        to its slot, and one sent while a superseded one still runs there waits for it instead
        of evaluating the whole window in another slot."""
        assert self.backend is not None
        slot = self.backend.slots.of(buf)
        return req if slot is None else msgspec.structs.replace(req, slot=slot)

    def _keep(self, prep: Prepared, out: Completion, ask: Ask, *, continued: bool = False) -> None:
        """A first part cut off where a continuation can follow is `continuable`; the cache
        keeps the completion's text, such a first part as such (shown at once, continued once
        the user pauses)."""
        sent = out.sent
        if out.stop == "error" or sent is None or sent.n_predict == 0:
            return
        out.continuable = (not continued and out.stop == "length" and sent.n_predict < prep.req.n_predict
                           and self.backend is not None and self.backend.caps.continues)
        if ask.cached and ask.post == "all":  # (a measurement's text is not the editor's)
            self.cache.put(prep.key, out.text, partial=out.continuable)
