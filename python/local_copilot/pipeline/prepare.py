"""A snapshot turned into what a request needs: the window around the cursor fitted to the
server's context, the repository context that fits beside it (the definitions the buffer's
language servers found for the names near the cursor, the signatures of the files the buffer's
file imports, the user's recent edits at other places, then the ring's chunks of other buffers
and yanks), the FIM request, what
the post-processor needs to know of the buffer, and the cache key.

The Preparer owns what prompt building learns and keeps between keystrokes: the bytes-per-token
estimate (calibrated from the token counts the server reports), the server's context where
only a refused prompt said it, the fitted windows, the ring of cross-file chunks, the
language servers' definitions, the imported files' signatures and the recent edits.
"""

from __future__ import annotations

import time

from ..config import Config
from ..errors import ConfigError
from ..indentation import NEAR_AFTER, NEAR_BEFORE, buffer_style
from ..prompt.budget import MIN_PROMPT_BUDGET, PROMPT_OVERHEAD, TokenEstimator, utf8_len
from ..prompt.context import FimContext
from ..prompt.definitions import LspDefinitions
from ..prompt.imports import Imports, as_comments, import_language
from ..prompt.recent_edits import RecentEdits
from ..prompt.request import FimRequest
from ..prompt.ring import ContextRing
from ..prompt.speed import MIN_CONTEXT_CHARS, ServerSpeed
from ..prompt.templates import ExtraChunk
from ..prompt.window import WindowFitter
from ..snapshot import Snapshot
from .postprocess import PostContext
from .said import Overflow, PromptSize, Said, Speed

__all__ = ["Prepared", "Preparer", "SOURCES", "prompt_bytes"]

# "headers": a cut window's enclosing headers (prompt/scope.py); "lsp": the language servers'
# definitions of the names near the cursor (prompt/definitions.py); "imports": the imported
# files' signatures (prompt/imports.py); "edits": the user's recent edits at other places
# (prompt/recent_edits.py); "ring": other buffers' and yanks' chunks (prompt/ring.py)
SOURCES = frozenset({"headers", "lsp", "imports", "edits", "ring"})
# the longest a buffer's prompt keeps its recent edits while its window stays (_recent_edits)
EDITS_HOLD_S = 120.0


class Prepared:
    """A snapshot turned into what a request needs."""

    __slots__ = ("snap", "ctx", "req", "pctx", "key", "sources")

    def __init__(self, snap: Snapshot, ctx: FimContext, req: FimRequest, pctx: PostContext, key: str,
                 sources: tuple[tuple[str, str], ...] = ()) -> None:
        self.snap, self.ctx, self.req, self.pctx, self.key = snap, ctx, req, pctx, key
        # what the prompt holds besides the window: (source, file name), source one of "lsp"
        # (definitions from the buffer's language servers), "imports" (an imported file's
        # signatures), "edits" (a region the user edited at another place) and "ring" (another
        # buffer's or a yank's text)
        self.sources = sources


class Preparer:
    # the file separator and name each cross-file chunk costs in the prompt
    CHUNK_OVERHEAD = 8

    def __init__(self) -> None:
        self.estimator = TokenEstimator()
        self.speed = ServerSpeed()  # the server's measured speeds size the window (prompt/speed.py)
        self.in_use: dict[str, int | None] = {}  # the last prompt's context, for stats and health
        self.sources: tuple[tuple[str, str], ...] = ()  # and what it held besides the window (Prepared.sources)
        # the server's context as its refusal of a too long prompt said it (a server that does
        # not say it otherwise, or says more than it holds)
        self.said_limit: int | None = None
        self.ring = ContextRing()
        # the signatures of the files each file imports, read off the keystroke path (imports.py)
        self.imports = Imports()
        # the definitions the buffers' language servers found near the cursor (Lua asks them)
        self.definitions = LspDefinitions()
        # the user's recent edits at other places (Lua sends each once it is finished)
        self.edits = RecentEdits()
        # buffer -> (its window's first row, when the edits were chosen, the edits its prompt
        # holds): see _recent_edits
        self._edits_held: dict[int, tuple[int, float, frozenset[int]]] = {}
        # the context sources in use besides the window: a measurement turns them off one by
        # one (bench/context_eval.py)
        self.sources_on: frozenset[str] = SOURCES
        starts: dict[int, int] = {}  # where each buffer's prompt starts, shared (window.py)
        self._window = WindowFitter(starts)  # the last snapshot's window, fitted
        # the speculative request's own: it must not evict the window the user types in (the
        # next key would fit all of it anew)
        self._spec_window = WindowFitter(starts)

    def new_server(self) -> None:
        """Another server (or model): bytes per token and the fitted windows start over."""
        self.estimator = TokenEstimator()
        self.speed = ServerSpeed()
        self.in_use = {}
        self.said_limit = None
        starts: dict[int, int] = {}
        self._window, self._spec_window = WindowFitter(starts), WindowFitter(starts)
        self._edits_held = {}

    def forget_buffer(self, buf: int) -> None:
        self._window.forget_buffer(buf)
        self._spec_window.forget_buffer(buf)
        self.definitions.forget(buf)
        self.edits.forget_buffer(buf)
        self._edits_held.pop(buf, None)

    def prepare(self, snap: Snapshot, cfg: Config, limit: int | None, stop_strings: tuple[str, ...], *,
                speculative: bool = False, style: str = "fim") -> Prepared:
        """For a server whose context per request is `limit` tokens (None: unknown), whose
        answers end at `stop_strings`, asked in prompt `style` (prompt/styles.py). Raises
        ConfigError when `limit` leaves no room."""
        if self.said_limit is not None:
            limit = self.said_limit if limit is None else min(limit, self.said_limit)
        budget, extra_budget = self.budget(limit, cfg)
        window = self._spec_window if speculative else self._window
        window.headers = "headers" in self.sources_on
        window_budget = None if budget is None else budget - extra_budget
        # the window a cold evaluation of which fits the latency target at the measured speed
        sizing = self.speed.sizing(cfg.latency_target_ms, self.estimator.bytes_per_token, cfg.context.lines_after)
        room = window_budget
        sized = sizing.window_tokens is not None and (window_budget is None or sizing.window_tokens < window_budget)
        if sized:
            window_budget = sizing.window_tokens
        fitted = window.fit(snap, lines_before=cfg.context.lines_before, lines_after=cfg.context.lines_after,
                            budget=window_budget, est=self.estimator, prefix_share=cfg.context.prefix_share,
                            suffix_lines=sizing.suffix_lines, anchor=sized,
                            room=room if room is not None else 1 << 30, least_bytes=MIN_CONTEXT_CHARS)
        ctx, key = fitted.ctx, fitted.key
        if not speculative:
            self.in_use = {"window_tokens": fitted.tokens, "sized_tokens": sizing.window_tokens,
                           "lines_before": len(ctx.prev_lines), "suffix_lines": sizing.suffix_lines,
                           "chars": len(ctx.prefix) + len(ctx.middle) + len(ctx.suffix)}
        if budget is not None:
            # cross-file chunks get the room the local window leaves, up to their share
            extra_budget = max(0, min(extra_budget, budget - fitted.tokens))
        if sized and sizing.window_tokens is not None:
            # they come first and stay cached while they do not change, but a cold prompt holds
            # them too: on a slow server they get at most half the window's time
            extra_budget = min(extra_budget, sizing.window_tokens // 2)
        defs: list[ExtraChunk] = []
        chunks: tuple[ExtraChunk, ...] = ()
        offered: list[tuple[str, ExtraChunk, int]] = []  # (source, chunk, its tokens in the prompt)
        if extra_budget > 0 and cfg.context.lsp and "lsp" in self.sources_on:
            # the language servers' definitions of what the code at the cursor calls first:
            # signatures with short bodies, the surest context there is; in the order they
            # were found, the newest (nearest the cursor) kept first when not all fit
            lsp = [(d, self.estimator.tokens(d.text) + self.CHUNK_OVERHEAD)
                   for d in self.definitions.get(snap.buf, self.ring.policy)]
            room, fits = extra_budget, set()
            for i in reversed(range(len(lsp))):
                if lsp[i][1] <= room:
                    fits.add(i)
                    room -= lsp[i][1]
            offered += [("lsp", ExtraChunk(d.filename, d.text), cost) for i, (d, cost) in enumerate(lsp) if i in fits]
        if extra_budget > 0 and "imports" in self.sources_on:
            # then the imported files' signatures: they change seldom, so the prompt's start
            # stays cached, and they name what the code at the cursor calls (a file the
            # language servers' definitions come from is theirs)
            seen = {c.filename for _, c, _ in offered}
            offered += [("imports", ExtraChunk(d.filename, d.text), self.estimator.tokens(d.text) + self.CHUNK_OVERHEAD)
                        for d in self.imports.ready(snap.path, snap.ft, self.ring.policy) if d.filename not in seen]
        taken: list[str] = []  # the source of each of defs
        for source, chunk, cost in offered:
            if cost <= extra_budget:
                defs.append(chunk)
                taken.append(source)
                extra_budget -= cost
        if extra_budget > 0 and cfg.context.edits and "edits" in self.sources_on:
            # then what the user changed elsewhere lately: it says what they are doing (a
            # renamed function, a new parameter, the call sites that follow), which the ring's
            # text around visited places only may; after the definitions and signatures, which
            # name what the code at the cursor calls. The newest first while the budget holds
            # them, laid out oldest first: the newest sits nearest the window, and a new edit
            # leaves the earlier ones' part of the prompt cached
            edits = self._recent_edits(snap, ctx, extra_budget, speculative=speculative)
            extra_budget -= sum(cost for _, cost in edits)
            for chunk, _ in reversed(edits):
                defs.append(chunk)
                taken.append("edits")
        if extra_budget > 0 and len(self.ring) and style != "continue" and "ring" in self.sources_on:
            local = ctx.prefix + ctx.middle + ctx.suffix
            found = self.ring.extra_for(local, extra_budget, lambda t: self.estimator.tokens(t) + self.CHUNK_OVERHEAD)
            chunks = tuple(ExtraChunk(c.filename, c.text) for c in found)
        extra = (*defs, *chunks)
        prefix, middle, heal = ctx.prefix, ctx.middle, ""
        if style == "continue":
            # a base model reads no text after the cursor: none is sent (the post-processor
            # still knows it), and other files' text would read as this one's start: the
            # definitions, imported signatures and recent edits go first as comments, under their files' names
            extra = ()
            preamble = as_comments(defs, snap.ft or import_language(snap.path))  # (the CLI knows no filetype)
            if not preamble:
                defs, taken = [], []  # (no line comment known for the language)
            prefix = preamble + prefix
            middle, heal = heal_trailing_space(middle)
        req = FimRequest(
            prefix=prefix,
            middle=middle,
            suffix="" if style == "continue" else ctx.suffix,
            n_predict=cfg.n_predict,
            n_indent=ctx.indent_chars,
            t_max_predict_ms=cfg.t_max_predict_ms,
            path=ctx.path,
            filetype=ctx.filetype,
            extra=extra,
        )
        pctx = post_context(snap, ctx, cfg, stop_strings, chat=style == "chat", heal=heal)
        sources = (*((source, d.filename) for source, d in zip(taken, defs, strict=True)),
                   *(("ring", c.filename) for c in chunks))  # (none for a base model: see above)
        if not speculative:
            self.sources = sources
        return Prepared(snap, ctx, req, pctx, key, sources)

    def _recent_edits(self, snap: Snapshot, ctx: FimContext, budget: int, *,
                      speculative: bool) -> list[tuple[ExtraChunk, int]]:
        """The recent edits that fit `budget`, the newest first, with their tokens; one in the
        rows the window shows is the window's already.

        The edits come before the window in the prompt, so one more there has the server
        evaluate the whole window again; and going back to a buffer after typing in another
        finds edits made there new (test_slots: back in a buffer, its window is not evaluated
        again). So while a buffer's window starts on the same row as at its last request,
        its prompt keeps the edits it held then, and takes only new edits of its own file (the
        user edited elsewhere in it and came back); edits of other files join once the window
        moves (it is evaluated anew anyway), or after EDITS_HOLD_S (a window that never moves).
        `make bench-real`, 0.5B shape on 2 CPU cores: a return to the other buffer evaluated
        ~240 prompt tokens (1.2-1.8 s) without this, 14-45 (0.4-0.6 s) with it; taking the new
        edits at the warm-up while the cursor rests 0.6 s instead cost 1.6 s there (the rest
        is shorter than the evaluation)."""
        top, bottom = snap.row - len(ctx.prev_lines), snap.row + len(ctx.next_lines)
        now = time.monotonic()
        held = self._edits_held.get(snap.buf)
        if held is not None and (held[0] != top or now - held[1] >= EDITS_HOLD_S):
            held = None
        out, chosen = [], []
        for e in self.edits.newest_first(self.ring.policy):
            if e.path == snap.path and e.first <= bottom and e.last >= top:
                continue
            if held is not None and e.serial not in held[2] and e.buf != snap.buf:
                continue
            cost = self.estimator.tokens(e.text) + self.CHUNK_OVERHEAD
            if cost <= budget:
                out.append((ExtraChunk(e.filename, e.text), cost))
                chosen.append(e.serial)
                budget -= cost
        if not speculative:
            self._edits_held[snap.buf] = (top, held[1] if held is not None else now, frozenset(chosen))
        return out

    def budget(self, limit: int | None, cfg: Config) -> tuple[int | None, int]:
        """The prompt's tokens for the local window and cross-file chunks together (None: the
        server's context is not known), and the most the chunks get of it."""
        if not limit:
            return None, cfg.context.extra_tokens
        budget = limit - cfg.n_predict - PROMPT_OVERHEAD
        if budget < MIN_PROMPT_BUDGET:
            raise ConfigError(
                f"the server gives each request only {limit} tokens, too few for n_predict={cfg.n_predict}; "
                "start it with a larger context per slot (-c, or fewer --parallel slots) or lower n_predict"
            )
        # cross-file chunks get their share only when the local window leaves room for it
        return budget, min(cfg.context.extra_tokens, budget // 3)

    def observe(self, req: FimRequest, prompt_tokens: int) -> None:
        """The server counted `req`'s whole prompt as `prompt_tokens`."""
        self.estimator.observe(prompt_bytes(req), prompt_tokens)

    def learn(self, said: Said) -> None:
        """What an answer said of the server (said.py): its speed, or the prompt's size in
        tokens, or that the prompt was too long."""
        if isinstance(said, Speed):
            if said.client_timed:
                self.speed.observe_client(said.timings)
            else:
                self.speed.observe(said.timings)
        elif isinstance(said, PromptSize):
            self.observe(said.req, said.tokens)
        elif isinstance(said, Overflow):
            self.overflowed(said.req, said.prompt_tokens, said.context_tokens)

    def overflowed(self, req: FimRequest | None, prompt_tokens: int | None, context_tokens: int | None = None) -> None:
        """The server refused a prompt as too long (its count and its context, when it said);
        `req` None: one that was fitted again still did not fit, so count more pessimistically."""
        self.estimator.overflowed(0 if req is None else prompt_bytes(req), prompt_tokens)
        if context_tokens:
            self.said_limit = context_tokens


def heal_trailing_space(middle: str) -> tuple[str, str]:
    """The typed line to send a base model, and the spaces taken off its end: a prompt that
    ends in a space after a word makes a model whose tokens carry their leading space (" range")
    start at a token boundary it rarely saw, and it writes junk ("for i in " -> "1:1000...";
    "for i in" -> " range(1, 10):"). The answer must then start with those spaces, which the
    post-processor takes off again (PostContext.heal). An indentation alone is left as it is."""
    kept = middle.rstrip(" \t")
    if kept.strip() and kept != middle:
        return kept, middle[len(kept):]
    return middle, ""


def post_context(snap: Snapshot, ctx: FimContext, cfg: Config, stop_strings: tuple[str, ...], *,
                 chat: bool = False, heal: str = "") -> PostContext:
    """What the post-processor needs to know of the buffer around the cursor (`chat`: the
    answer is a chat model's, wrapped as chat models wrap code; `heal`: the spaces typed at
    the cursor that the prompt left out, which the answer starts with). The buffer's indentation
    options and the lines around the cursor say how the suggestion's indentation is written."""
    return PostContext(
        line_prefix=ctx.middle,
        line_suffix=ctx.line_suffix,
        next_lines=ctx.next_lines,
        prev_lines=ctx.prev_lines,
        tabstop=snap.ts,
        max_lines=cfg.max_lines,
        stop_strings=stop_strings,
        filetype=ctx.filetype,
        chat=chat,
        heal=heal,
        indent=buffer_style(
            (*ctx.prev_lines[-NEAR_BEFORE:], ctx.middle + ctx.line_suffix, *ctx.next_lines[:NEAR_AFTER]),
            expandtab=snap.et, shiftwidth=snap.sw, tabstop=snap.ts),
    )


def prompt_bytes(req: FimRequest) -> int:
    return sum(map(utf8_len, (req.prefix, req.middle, req.suffix))) + sum(utf8_len(c.text) for c in req.extra)
