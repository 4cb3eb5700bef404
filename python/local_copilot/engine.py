"""The request lifecycle: latest wins per buffer, streams become render plans.

Everything here runs on the worker's asyncio loop (see worker.py); the editor is reached only
through the `Editor` port, whose Neovim implementation hops to pynvim's thread.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

import httpx

from .backends import Backend, FimRequest, make_backend
from .budget import TokenEstimator, fit_context
from .config import Config
from .context import FimContext, build_context
from .errors import BackendError, ConfigError
from .log import log
from .notify import EpisodeNotifier
from .postprocess import PostContext, process
from .render import RenderPlan
from .snapshot import Snapshot

__all__ = ["Editor", "Engine"]


class Editor(Protocol):
    def show(self, plan: RenderPlan) -> None: ...

    def notify(self, message: str, level: str) -> None: ...


class Engine:
    def __init__(self, editor: Editor, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.editor = editor
        self.config: Config | None = None
        self.backend: Backend | None = None
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self.notifier = EpisodeNotifier(editor.notify)
        self.stats = {"requests": 0, "cancels": 0, "errors": 0}
        self.estimator = TokenEstimator()

    # -- configuration -------------------------------------------------------------------

    def configure(self, cfg: Config) -> None:
        self.config = cfg
        active = cfg.active
        timeout = httpx.Timeout(active.timeout_ms / 1000, connect=2.0)
        if self._client is not None:
            asyncio.get_running_loop().create_task(self._client.aclose())
        # one long-lived client: keep-alive to the server, closed streams cancel generation
        self._client = httpx.AsyncClient(timeout=timeout, transport=self._transport, trust_env=False)
        self.backend = make_backend(cfg.backend, active, self._client)
        self.estimator = TokenEstimator()  # bytes per token differ between models

    # -- requests ------------------------------------------------------------------------

    def submit(self, snap: Snapshot) -> None:
        """A new snapshot for a buffer: cancel what is in flight there, start anew."""
        self.cancel(snap.buf)
        if self.backend is None or self.config is None:
            return
        self._tasks[snap.buf] = asyncio.get_running_loop().create_task(self._run(snap))

    def cancel(self, buf: int) -> None:
        task = self._tasks.pop(buf, None)
        if task is not None and not task.done():
            task.cancel()  # exits `async with client.stream(...)`: the connection closes
            self.stats["cancels"] += 1

    def cancel_all(self) -> None:
        for buf in list(self._tasks):
            self.cancel(buf)

    async def close(self) -> None:
        self.cancel_all()
        if self._client is not None:
            await self._client.aclose()

    async def _run(self, snap: Snapshot) -> None:
        assert self.config is not None and self.backend is not None
        cfg, backend = self.config, self.backend
        self.stats["requests"] += 1
        ctx = build_context(snap, lines_before=cfg.context.lines_before, lines_after=cfg.context.lines_after)
        try:
            ctx = await self._fit(ctx, snap, backend, cfg)
        except (BackendError, ConfigError) as exc:
            self._failed(exc)
            return
        req = FimRequest(
            prefix=ctx.prefix,
            middle=ctx.middle,
            suffix=ctx.suffix,
            n_predict=cfg.n_predict,
            n_indent=ctx.indent,
            t_max_predict_ms=cfg.t_max_predict_ms,
            path=ctx.path,
        )
        pctx = PostContext(
            line_prefix=ctx.middle,
            line_suffix=ctx.line_suffix,
            next_lines=ctx.next_lines,
            prev_lines=ctx.prev_lines,
            tabstop=snap.ts,
            max_lines=cfg.max_lines,
            stop_strings=backend.stop_strings,
        )

        def plan(text: str, final: bool) -> RenderPlan:
            return RenderPlan(buf=snap.buf, tick=snap.tick, row=snap.row, col=snap.col,
                              seq=snap.seq, text=text, final=final)

        raw, shown = "", ""
        started = time.perf_counter()
        stream = backend.complete(req)
        try:
            async for chunk in stream:
                if chunk.prompt_tokens:
                    prompt = req.prefix + req.middle + req.suffix
                    self.estimator.observe(len(prompt.encode("utf-8", "surrogateescape")), chunk.prompt_tokens)
                raw += chunk.text
                result = process(raw, pctx, final=False)
                if result.text != shown:
                    shown = result.text
                    self.editor.show(plan(shown, False))
                if chunk.done or result.done:
                    break
        except asyncio.CancelledError:
            raise
        except (BackendError, ConfigError) as exc:
            self._failed(exc)
            return
        except Exception:  # a bug must not reach :messages as a stack trace
            self.stats["errors"] += 1
            log.exception("completion request failed")
            self.notifier.failure("internal", "local-copilot: internal error, see the log (:LocalCopilot log)", "error")
            return
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        self.notifier.success()
        final = process(raw, pctx, final=True).text
        log.debug("completion done in %.1f ms: %d chars", (time.perf_counter() - started) * 1000, len(final))
        self.editor.show(plan(final, True))

    # room the template and server-added text take (FIM tokens, repo/file markers)
    PROMPT_OVERHEAD = 48

    async def _fit(self, ctx: FimContext, snap: Snapshot, backend: Backend, cfg: Config) -> FimContext:
        limit = await backend.context_limit()
        if not limit:
            return ctx
        budget = limit - cfg.n_predict - self.PROMPT_OVERHEAD
        if budget < 64:
            raise ConfigError(
                f"the server gives each request only {limit} tokens, too few for n_predict={cfg.n_predict}; "
                "start it with a larger context per slot (-c, or fewer --parallel slots) or lower n_predict"
            )
        first_row = snap.row - len(ctx.prev_lines)
        return fit_context(ctx, budget, self.estimator, first_row=first_row)

    def _failed(self, exc: Exception) -> None:
        self.stats["errors"] += 1
        log.warning("%s", exc)
        self.notifier.failure(type(exc).__name__, f"local-copilot: {exc}")

