"""The sync calls from Lua (`LocalCopilotCall`): status, :checkhealth, :LocalCopilot stats,
the backend's state, the models a server lists, a path's privacy verdict, and what is still
running (tests and bench/). They run on pynvim's thread and wait for the worker loop where
the core's state is read; the events that change that state come through plugin.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

import msgspec
import pynvim

from ..config import Config, load_config
from ..errors import ConfigError
from ..health.checks import Item
from ..log import log, log_path
from ..privacy.policy import Policy
from . import protocol
from .running import Running
from .windows import Windows

__all__ = ["Host", "Queries"]


class Host(Protocol):
    """What the calls read of the plugin (plugin.py)."""

    nvim: pynvim.Nvim
    config: Config | None
    config_error: str | None
    windows: Windows
    channel_events: int  # events that came on the worker's own channel
    channel_note: str  # why there is no such channel, for :checkhealth
    _running: Running | None  # (None until the host is used)

    def _start(self) -> Running: ...

    def live_channel_id(self) -> int | None: ...


class Queries:
    def __init__(self, host: Host) -> None:
        self.host = host

    def answer(self, args: list[Any]) -> Any:
        """The answer to the call `args[0]` with its arguments, None for a name unknown here."""
        name = args[0]
        host = self.host
        if name == "status":
            return {
                "backend": host.config.backend if host.config else None,
                "url": host.config.active.url if host.config else None,
                "config_error": host.config_error,
                "stats": self._summary(),
                "log": str(log_path()),
            }
        if name == "privacy":  # why the file at args[1] is never sent ('' = it may be), for :checkhealth
            return self._privacy(str(args[1]), args[2] if len(args) > 2 else None)
        if name == "debug_state":  # tests and bench/: what is still running (0 when idle)
            return self._debug_state()
        if name == "backend_status":
            return self._backend_status()
        if name == "models":  # the completion of :LocalCopilotBackend model (args[1]: setup()'s options)
            return self._models(args[1] if len(args) > 1 else None)
        if name == "leaving":  # sync, so the servers are released before Neovim exits
            running = host._running
            if running is not None:
                running.worker.run(asyncio.to_thread(running.backends.close), timeout=5)
            return True
        elif name == "health":
            return self._health(args[1] if len(args) > 1 else None)
        elif name == "stats":
            return self._stats()
        return None

    def _privacy(self, path: str, raw: Any) -> str:
        """The privacy policy's reason for never sending the file at `path` under the options
        `raw` (the host's own when None), '' when it may be sent."""
        try:
            cfg = load_config(raw) if raw is not None else self.host.config
        except ConfigError:
            cfg = self.host.config
        policy = Policy.from_config(cfg) if cfg is not None else Policy()
        return policy.path_reason(path) or ""

    def _on_worker(self, fn: Callable[[], Any], timeout: float = 5.0) -> Any:
        """Run `fn` on the worker loop, where the core mutates its stats, and wait for it."""
        worker = self.host._start().worker

        async def call() -> Any:
            return fn()

        return worker.run(call(), timeout)

    def _debug_state(self) -> dict[str, Any]:
        """Requests in flight and every live task on the worker loop (tests: nothing stuck)."""
        host = self.host
        running = host._start()
        core, loop = running.core, running.worker.loop

        def state() -> dict[str, Any]:
            running = [state.in_flight() for state in core.buffers.values()]
            return {
                "tasks": sum(r["tasks"] for r in running),
                "speculative": sum(r["speculative"] for r in running),
                # first parts shown whose rest is fetched once the user pauses (not a task yet)
                "pauses": sum(r["pauses"] for r in running),
                "edits": sum(r["edits"] for r in running),
                "warmups": sum(r["warmups"] for r in running),
                # minus the task running this very check
                "loop_tasks": sum(1 for t in asyncio.all_tasks(loop) if not t.done()) - 1,
                "bytes_per_token": core.prompts.estimator.bytes_per_token,
                # the worker's own channel to Neovim, when connected (channel.py)
                "channel": host.live_channel_id(),
                "channel_events": host.channel_events,
                # buffers something is kept for (a window of their text)
                "buffers": sorted(host.windows.buffers() | {b for b, st in core.buffers.items() if st.last}),
            }

        result: dict[str, Any] = self._on_worker(state)
        return result

    def _summary(self) -> dict[str, Any]:
        """The engine's stats, with the suggestions Lua showed since it last told (it tells
        with the next request; a stats call must not wait for that)."""
        core = self.host._start().core
        try:
            shown = int(self.host.nvim.exec_lua(protocol.LUA_TAKE_SHOWN) or 0)
        except Exception:  # an older Lua, or none loaded: nothing to add
            shown = 0

        def take() -> dict[str, Any]:
            if shown:
                core.stats.count("shown", shown)
            summary = core.stats.summary()
            summary["sizing"] = core.sizing()
            return summary

        summary: dict[str, Any] = self._on_worker(take)
        return summary

    def _stats(self) -> dict[str, Any]:
        summary = self._summary()
        active = self.host.config.backend if self.host.config else None
        summary["active"] = active
        if active and "?" in summary["backends"] and active not in summary["backends"]:
            # counted before any sample named a backend: while nothing switched, the active one
            summary["backends"][active] = summary["backends"].pop("?")
        return summary

    def _health(self, raw: Any) -> list[dict[str, Any]]:
        """The health report as plain data for health.lua. `raw` is the table Lua's setup()
        holds; without it, the options this host last received (and its last ConfigError)."""
        from ..health import report as diagnostics

        host = self.host
        worker = host._start().worker  # it runs the probes
        config_error = None
        if raw is None:
            if host.config is not None:
                raw = msgspec.to_builtins(host.config)
            config_error = host.config_error
        stats = self._summary()
        coro = diagnostics.collect(raw, config_error=config_error, stats=stats, log_file=log_path(), editor=True)
        future = asyncio.run_coroutine_threadsafe(coro, worker.loop)
        try:
            report = future.result(45.0)
        except Exception as exc:  # a timeout or a bug: say so in the report instead of a stack trace
            future.cancel()  # stop its probes; Neovim has waited long enough
            log.exception("health check failed")
            return [{"name": "Python host", "items": [{"level": "error", "message": f"the health check failed: {exc!r}",
                                                        "advice": [f"see {log_path()}"]}]}]
        section = next((sec for sec in report.sections if sec.name == "host interpreter and packages"), None)
        if section is not None:
            section.items.append(self._channel_item())
        sections: list[dict[str, Any]] = msgspec.to_builtins(report.sections)
        return sections

    def _channel_item(self) -> Item:
        chan = self.host.live_channel_id()
        if chan is not None:
            return Item(level="ok", message=f"keystrokes reach the host's network thread on its own "
                                    f"channel to Neovim (channel {chan})")
        return Item(level="info", message="keystrokes go through the channel Neovim started the Python host on "
                                f"(its network thread has no channel of its own: {self.host.channel_note})",
                                advice=["this works, with a little more host CPU per keystroke"])

    def _backend_status(self) -> dict[str, Any]:
        running = self.host._start()
        core = running.core
        cfg = self.host.config
        if cfg is None:
            return {"error": self.host.config_error or "no configuration yet"}
        active = cfg.active
        backend = core.backend
        template = getattr(backend, "template", None)
        model = getattr(backend, "model", None)
        summary = core.stats.summary()["backends"].get(cfg.backend, {})
        backends = running.backends
        return {
            "backend": cfg.backend,
            "kind": active.kind,
            "url": active.url,
            "model": getattr(model, "id", "") or active.model or "(server decides)",
            "template": getattr(template, "name", "") or active.fim_template or
                        ("server-side (/infill)" if active.kind == "llama.cpp" and (
                            active.endpoint == "infill" or getattr(backend, "resolved", False))
                         else "detected on first request"),
            "server": backends.server_state(cfg.backend),
            "pending": backends.pending,
            "latency": {k: summary.get(k) for k in ("n", "ttft_ms", "total_ms")},
            "names": sorted(cfg.backends),
            "next_edit": self._next_edit_status(cfg),
        }

    def _models(self, raw: Any) -> dict[str, Any]:
        """The models the active entry's server lists ({'models': [{id, state}], 'error'}). The
        options in force here, else `raw` (a host that has not had them yet: a command line
        completed before any event went)."""
        from ..backends.models import entry_models
        from ..errors import BackendError

        cfg = self.host.config
        if cfg is None and raw is not None:
            try:
                cfg = load_config(raw)
            except ConfigError as exc:
                return {"models": [], "error": str(exc)}
        if cfg is None:
            return {"models": [], "error": self.host.config_error or "no configuration yet"}
        try:
            models = self.host._start().worker.run(entry_models(cfg.backend, cfg.active, timeout_s=2.0), 3.0)
        except (BackendError, TimeoutError) as exc:
            return {"models": [], "error": str(exc) or type(exc).__name__}
        return {"models": msgspec.to_builtins(models), "error": None}

    def _next_edit_status(self, cfg: Config) -> dict[str, Any] | None:
        """The next-edit backend, its format and its server, while next edits are on."""
        if not cfg.next_edit.enabled:
            return None
        running = self.host._start()
        name = cfg.next_edit.backend or cfg.backend
        detected = running.core.next_edits.format_name
        return {"backend": name, "url": cfg.backends[name].url,
                "format": cfg.next_edit.format or detected or "detected on first request",
                "server": running.backends.server_state(name)["state"]}
