"""The remote plugin: decode events from Lua, hand them to the engine on the worker thread.

Handlers are async notifications (Lua never waits on Python while typing) and never raise:
an exception in a pynvim handler would print a stack trace into :messages.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import pynvim

from ..backend_manager import BackendManager
from ..config import Config, load_config
from ..engine import Engine
from ..errors import ConfigError
from ..health_checks import Item
from ..log import log, log_path, setup_logging
from ..privacy import Policy
from ..snapshot import Snapshot
from ..worker import Worker
from .bridge import NvimEditor
from .channel import NvimChannel

__all__ = ["LocalCopilotPlugin"]

F = TypeVar("F", bound=Callable[..., Any])


def guarded(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(self: LocalCopilotPlugin, *args: Any) -> Any:
        try:
            return fn(self, *args)
        except Exception:
            log.exception("handler %s failed", fn.__name__)
            return None

    return wrapper  # type: ignore[return-value]


def _call_now(fn: Callable[..., Any], *args: Any) -> None:
    fn(*args)


@pynvim.plugin
class LocalCopilotPlugin:
    def __init__(self, nvim: pynvim.Nvim) -> None:
        # nothing with side effects here: the module is imported by :UpdateRemotePlugins too
        self.nvim = nvim
        self._worker: Worker | None = None
        self._engine: Engine | None = None
        self._editor: NvimEditor | None = None
        self.config: Config | None = None
        self.config_error: str | None = None
        self._backends: BackendManager | None = None
        self._channel_events = 0  # events that came on it (tests: the keystroke path uses it)
        self._channel_note = "the host has not started it yet"  # why not, for :checkhealth
        # buf -> the last whole snapshot window; Lua sends only the cursor line while nothing
        # else in the window changed (see _snapshot)
        self._windows: dict[int, Snapshot] = {}
        self._seqs: dict[int, int] = {}  # buf -> the newest snapshot seq handled
        self._submitted: dict[int, int] = {}  # buf -> the newest seq given to the engine (worker loop)

    def _start(self) -> Engine:
        if self._engine is None:
            setup_logging()
            self._editor = NvimEditor(self.nvim)
            self._worker = Worker()
            self._editor.worker_thread = self._worker.thread
            self._engine = Engine(self._editor)
            self._backends = BackendManager(self._editor.notify, self._use_config, self._editor.backend_ready)
            address = os.environ.get("NVIM") or ""
            if address:
                self._worker.call(self._open_channel, address)
            else:
                self._channel_note = "Neovim gave it no server address ($NVIM)"
        return self._engine

    # -- the worker's own channel to Neovim (see channel.py) ---------------------------------

    def _open_channel(self, address: str) -> None:
        assert self._worker is not None
        self._worker.loop.create_task(self._connect(address))

    async def _connect(self, address: str) -> None:
        # Neovim answers the new channel once it is not waiting on a call of the host's own
        self._channel_note = "Neovim has not answered it yet"
        try:
            await NvimChannel.open(address, self._on_channel_event, self._on_channel_ready, self._on_channel_lost)
        except Exception as exc:  # e.g. no unix sockets here: the host's own channel carries on
            self._channel_note = f"cannot connect to {address}: {exc or type(exc).__name__}"
            log.info("no second channel to Neovim: %s", self._channel_note)

    def _on_channel_ready(self, channel: NvimChannel) -> None:
        assert self._editor is not None
        self._editor.channel = channel
        # from now on Lua sends keystroke events there (it sends the next window whole)
        channel.lua("require('local_copilot')._use_channel(...)", channel.id)

    def _live_channel_id(self) -> int | None:
        """The worker's own channel to Neovim while it is connected (the editor holds it)."""
        channel = self._editor.channel if self._editor is not None else None
        return channel.id if channel is not None and channel.connected else None

    def _on_channel_lost(self) -> None:
        self._channel_note = "it was closed"
        if self._editor is not None:
            self._editor.channel = None

    @guarded
    def _on_channel_event(self, name: str, payload: Any) -> None:
        """An event on the worker's channel: handled right here on the worker loop."""
        self._channel_events += 1
        self._dispatch(name, payload, _call_now)

    def _use_config(self, cfg: Config) -> None:
        """A backend switch took effect (runs on the worker loop)."""
        self.config = cfg
        assert self._engine is not None
        self._engine.configure(cfg)

    def _configure(self, raw: Any, run: Callable[..., None]) -> None:
        engine = self._start()
        try:
            cfg = load_config(raw)
        except ConfigError as exc:
            self.config, self.config_error = None, str(exc)
            log.warning("bad config: %s", exc)
            assert self._editor is not None
            self._editor.notify(f"local-copilot: bad option: {exc}", "error")
            # status() says so until setup() is called again (it said 'waiting' for the
            # snapshots this host drops)
            self._editor.backend_state("bad option", str(exc))
            run(engine.cancel_all)
            engine.config = None
            return
        self.config, self.config_error = cfg, None
        setup_logging(cfg.log_level)
        assert self._editor is not None
        self._editor.privacy_rules(Policy.from_config(cfg).lua_rules())  # Lua stops reading what it refuses
        run(engine.configure, cfg)

    def _snapshot(self, payload: dict[str, Any]) -> Snapshot | None:
        """A snapshot from Lua. While the user types on one line, Lua sends that line only
        (`base` = the seq of the last whole window it sent): a 260-line window per keystroke
        cost Neovim ~0.3 ms to send and the host as much to decode (bench/run.py). Without
        the base here (a new host), Lua is told to send the whole window again."""
        buf, seq = int(payload.get("buf", -1)), int(payload.get("seq", 0))
        if seq < self._seqs.get(buf, 0):
            # the same Lua sent a newer one already: it came first on the worker's channel
            # while this one waited on the host's (only while Lua switches channels)
            return None
        self._seqs[buf] = seq
        base_seq = payload.pop("base", None)
        if base_seq is None:
            snap = msgspec.convert(payload, Snapshot)
            self._windows[snap.buf] = snap
            return snap
        base = self._windows.get(buf)
        if base is None or base.seq != base_seq or payload.get("first") != base.first:
            assert self._editor is not None
            self._editor.lua("require('local_copilot')._resync(...)", buf)
            return None
        lines = list(base.lines)
        lines[int(payload["row"]) - base.first] = payload.pop("line")
        payload["lines"] = lines
        return msgspec.convert(payload, Snapshot)

    def _submit(self, snap: Snapshot) -> None:
        """On the worker loop: the engine gets a buffer's snapshots oldest first. _snapshot
        drops an older one as it is read, but one read on the host's channel reaches this
        loop a hop later, maybe after a newer one read here on the worker's own channel (only
        while Lua switches channels): it would cancel the newer one's request."""
        if snap.seq < self._submitted.get(snap.buf, 0):
            return
        self._submitted[snap.buf] = snap.seq
        assert self._engine is not None
        self._engine.submit(snap)

    def _forget(self, buf: int) -> None:
        self._submitted.pop(buf, None)
        assert self._engine is not None
        self._engine.forget(buf)

    @pynvim.rpc_export("local_copilot_event", sync=False)
    @guarded
    def on_notification(self, name: str, payload: Any = None) -> None:
        """The keystroke path: Lua's vim.rpcnotify straight to this host (no Vimscript
        function in between, which converted every snapshot to Vim values first)."""
        self.on_event([name, payload])

    @pynvim.function("LocalCopilotEvent", sync=False)
    @guarded
    def on_event(self, args: list[Any]) -> None:
        self._start()
        assert self._worker is not None
        self._dispatch(args[0], args[1] if len(args) > 1 else None, self._worker.call)

    def _count_shown(self, payload: dict[str, Any], run: Callable[..., None]) -> Engine:
        """The suggestions Lua showed since its last request ride along with a request."""
        engine = self._start()
        if "shown" in payload:
            run(engine.stats.count, "shown", int(payload.pop("shown")))
        return engine

    def _dispatch(self, name: str, payload: Any, run: Callable[..., None]) -> None:
        """One event from Lua. `run(fn, *args)` runs `fn` on the worker loop: a hop from
        pynvim's thread, a plain call on the worker's own channel."""
        if name == "config":
            self._configure(payload, run)
        elif name == "snapshot":
            if "config" in payload:
                self._configure(payload.pop("config"), run)
            self._count_shown(payload, run)
            if self.config is None:
                return
            snap = self._snapshot(payload)
            if snap is not None:
                run(self._submit, snap)
        elif name == "alternatives":
            engine = self._count_shown(payload, run)
            if self.config is None:
                return
            snap = self._snapshot(payload)
            if snap is not None:
                run(engine.alternatives, snap)
        elif name == "backend":
            self._start()
            assert self._backends is not None
            if self.config is None:
                assert self._editor is not None
                self._editor.notify(f"local-copilot: fix the options first: {self.config_error}", "error")
                return
            action, target = payload.get("action", ""), payload.get("name") or self.config.backend
            if action == "switch":
                run(self._backends.switch, self.config, target)
            elif action == "stop":
                run(self._backends.stop, target)
            elif action == "restart":
                run(self._backends.restart, self.config, target)
        elif name == "chunk":
            engine = self._start()
            run(engine.add_chunk, str(payload["path"]), list(payload["lines"]), payload.get("around"))
        elif name == "yank":
            engine = self._start()
            run(engine.add_yank, str(payload["path"]), list(payload["lines"]))
        elif name == "cancel":
            engine = self._start()
            run(engine.cancel, int(payload))
        elif name == "accepted":
            run(self._start().note_accept, str(payload))
        elif name == "typed_through":
            engine = self._start()
            if isinstance(payload, dict) and self.config is not None:
                text = str(payload.pop("text", ""))
                snap = self._snapshot(payload)
                if snap is not None:
                    run(engine.note_typed_through, snap, text)
        elif name == "forget":  # the buffer was wiped: its window and seq are of no use
            self._windows.pop(int(payload), None)
            self._seqs.pop(int(payload), None)
            run(self._forget, int(payload))
        elif name == "hello":
            self._start()

    @pynvim.function("LocalCopilotCall", sync=True)
    @guarded
    def on_call(self, args: list[Any]) -> Any:
        name = args[0]
        if name == "status":
            return {
                "backend": self.config.backend if self.config else None,
                "url": self.config.active.url if self.config else None,
                "config_error": self.config_error,
                "stats": self._summary(),
                "log": str(log_path()),
            }
        if name == "ping":
            return "pong"
        if name == "privacy":  # why the file at args[1] is never sent ('' = it may be), for :checkhealth
            return self._privacy(str(args[1]), args[2] if len(args) > 2 else None)
        if name == "debug_state":  # tests and bench/: what is still running (0 when idle)
            return self._debug_state()
        if name == "backend_status":
            return self._backend_status()
        if name == "leaving":  # sync, so the servers are released before Neovim exits
            if self._backends is not None and self._worker is not None:
                self._worker.run(asyncio.to_thread(self._backends.close), timeout=5)
            return True
        elif name == "health":
            return self._health(args[1] if len(args) > 1 else None)
        elif name == "stats":
            return self._stats()
        return None

    # -- :checkhealth and :LocalCopilot stats (sync calls from Lua) ----------------------

    def _privacy(self, path: str, raw: Any) -> str:
        """The privacy policy's reason for never sending the file at `path` under the options
        `raw` (the host's own when None), '' when it may be sent."""
        try:
            cfg = load_config(raw) if raw is not None else self.config
        except ConfigError:
            cfg = self.config
        policy = Policy.from_config(cfg) if cfg is not None else Policy()
        return policy.path_reason(path) or ""

    def _on_worker(self, fn: Callable[[], Any], timeout: float = 5.0) -> Any:
        """Run `fn` on the worker loop, where the engine mutates its stats, and wait for it."""
        self._start()
        assert self._worker is not None

        async def call() -> Any:
            return fn()

        return self._worker.run(call(), timeout)

    def _debug_state(self) -> dict[str, Any]:
        """Requests in flight and every live task on the worker loop (tests: nothing stuck)."""
        engine = self._start()
        assert self._worker is not None
        loop = self._worker.loop

        def state() -> dict[str, Any]:
            return {
                "tasks": sum(1 for t in engine._tasks.values() if not t.done()),
                "speculative": sum(1 for t in engine._speculative.values() if not t.done()),
                # first parts shown whose rest is fetched once the user pauses (not a task yet)
                "pauses": sum(1 for h in engine._pauses.values() if not h.cancelled()),
                # minus the task running this very check
                "loop_tasks": sum(1 for t in asyncio.all_tasks(loop) if not t.done()) - 1,
                "bytes_per_token": engine.estimator.bytes_per_token,
                # the worker's own channel to Neovim, when connected (channel.py)
                "channel": self._live_channel_id(),
                "channel_events": self._channel_events,
                # buffers something is kept for (a window of their text)
                "buffers": sorted(set(self._windows) | set(engine._last)),
            }

        result: dict[str, Any] = self._on_worker(state)
        return result

    def _summary(self) -> dict[str, Any]:
        """The engine's stats, with the suggestions Lua showed since it last told (it tells
        with the next request; a stats call must not wait for that)."""
        engine = self._start()
        try:
            shown = int(self.nvim.exec_lua("return require('local_copilot')._take_shown()") or 0)
        except Exception:  # an older Lua, or none loaded: nothing to add
            shown = 0

        def take() -> dict[str, Any]:
            if shown:
                engine.stats.count("shown", shown)
            return engine.stats.summary()

        summary: dict[str, Any] = self._on_worker(take)
        return summary

    def _stats(self) -> dict[str, Any]:
        summary = self._summary()
        active = self.config.backend if self.config else None
        summary["active"] = active
        if active and "?" in summary["backends"] and active not in summary["backends"]:
            # counted before any sample named a backend: while nothing switched, the active one
            summary["backends"][active] = summary["backends"].pop("?")
        return summary

    def _health(self, raw: Any) -> list[dict[str, Any]]:
        """The health report as plain data for health.lua. `raw` is the table Lua's setup()
        holds; without it, the options this host last received (and its last ConfigError)."""
        import asyncio

        from .. import diagnostics

        self._start()  # the worker runs the probes
        assert self._worker is not None
        config_error = None
        if raw is None:
            if self.config is not None:
                raw = msgspec.to_builtins(self.config)
            config_error = self.config_error
        stats = self._summary()
        coro = diagnostics.collect(raw, config_error=config_error, stats=stats, log_file=log_path(), editor=True)
        future = asyncio.run_coroutine_threadsafe(coro, self._worker.loop)
        try:
            report = future.result(45.0)
        except Exception as exc:  # a timeout or a bug: say so in the report instead of a stack trace
            future.cancel()  # stop its probes; Neovim has waited long enough
            log.exception("health check failed")
            return [{"name": "python3 host", "items": [{"level": "error", "message": f"the health check failed: {exc!r}",
                                                        "advice": [f"see {log_path()}"]}]}]
        host = next((sec for sec in report.sections if sec.name == "host interpreter and packages"), None)
        if host is not None:
            host.items.append(self._channel_item())
        return msgspec.to_builtins(report.sections)

    def _channel_item(self) -> Item:
        chan = self._live_channel_id()
        if chan is not None:
            return Item(level="ok", message=f"keystrokes reach the host's network thread on its own "
                                    f"channel to Neovim (channel {chan})")
        return Item(level="info", message="keystrokes go through the python3 host's channel "
                                f"(its network thread has no channel of its own: {self._channel_note})",
                                advice=["this works, with a little more host CPU per keystroke"])

    def _backend_status(self) -> dict[str, Any]:
        engine = self._start()
        cfg = self.config
        if cfg is None:
            return {"error": self.config_error or "no configuration yet"}
        active = cfg.active
        backend = engine.backend
        template = getattr(backend, "template", None)
        model = getattr(backend, "model", None)
        summary = engine.stats.summary()["backends"].get(cfg.backend, {})
        assert self._backends is not None
        return {
            "backend": cfg.backend,
            "kind": active.kind,
            "url": active.url,
            "model": getattr(model, "id", "") or active.model or "(server decides)",
            "template": getattr(template, "name", "") or active.fim_template or
                        ("server-side (/infill)" if active.kind == "llama.cpp" and (
                            active.endpoint == "infill" or getattr(backend, "resolved", False))
                         else "detected on first request"),
            "server": self._backends.server_state(cfg.backend),
            "pending": self._backends.pending,
            "latency": {k: summary.get(k) for k in ("n", "ttft_ms", "total_ms")},
            "names": sorted(cfg.backends),
        }
