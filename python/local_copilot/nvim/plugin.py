"""The remote plugin: decode events from Lua, hand them to the core on the worker thread.

Handlers are async notifications (Lua never waits on Python while typing) and never raise:
an exception in a pynvim handler would print a stack trace into :messages.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import pynvim

from .. import updates
from ..config import Config, load_config
from ..core import Core
from ..errors import ConfigError
from ..health.checks import Item
from ..log import log, log_path, setup_logging
from ..privacy.policy import Policy
from ..servers.backend_manager import BackendManager, Change
from ..snapshot import Snapshot
from . import protocol
from .bridge import NvimEditor
from .channel import NvimChannel
from .worker import Worker

if TYPE_CHECKING:
    from .lsp_requests import LspRequests

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


class _Running:
    """What runs once the host is used: the worker loop, the editor port, the core and the
    backend switcher (built together, so none is there without the others)."""

    def __init__(self, nvim: pynvim.Nvim, use_config: Callable[[Change], None],
                 start_hint: Callable[[str], str | None]) -> None:
        self.editor = NvimEditor(nvim)
        self.worker = Worker()
        self.editor.worker_thread = self.worker.thread
        self.core = Core(self.editor, start_hint)
        self.backends = BackendManager(updates.notices(self.editor), use_config,
                                       lambda name: self.editor.update(updates.BackendReady(backend=name)))
        self._lsp: LspRequests | None = None

    @property
    def lsp(self) -> LspRequests:
        """The in-process language server's requests (lsp.lua), built at the first: lsprotocol
        takes longer to import than the rest of the host, and only `lsp = true` needs it."""
        if self._lsp is None:
            from .lsp_requests import LspRequests

            self._lsp = LspRequests(self.core, self.editor)
        return self._lsp


@pynvim.plugin
class LocalCopilotPlugin:
    def __init__(self, nvim: pynvim.Nvim) -> None:
        # nothing with side effects here: the module is imported by :UpdateRemotePlugins too
        self.nvim = nvim
        self._running: _Running | None = None  # what runs once the host is used (see _start)
        self.config: Config | None = None
        self.config_error: str | None = None
        self._channel_events = 0  # events that came on it (tests: the keystroke path uses it)
        self._channel_note = "the host has not started it yet"  # why not, for :checkhealth
        # buf -> the last whole snapshot window; Lua sends only the cursor line while nothing
        # else in the window changed (see _snapshot)
        self._windows: dict[int, Snapshot] = {}
        self._seqs: dict[int, int] = {}  # buf -> the newest snapshot seq handled
        self._submitted: dict[int, int] = {}  # buf -> the newest seq given to the core (worker loop)

    def _start(self) -> _Running:
        if self._running is None:
            setup_logging()
            self._running = _Running(self.nvim, self._use_config, self._start_hint)
            address = os.environ.get("NVIM") or ""
            if address:
                self._running.worker.call(self._open_channel, address)
            else:
                self._channel_note = "Neovim gave it no server address ($NVIM)"
        return self._running

    # -- the worker's own channel to Neovim (see channel.py) ---------------------------------

    def _open_channel(self, address: str) -> None:
        self._start().worker.loop.create_task(self._connect(address))

    async def _connect(self, address: str) -> None:
        # Neovim answers the new channel once it is not waiting on a call of the host's own
        self._channel_note = "Neovim has not answered it yet"
        try:
            await NvimChannel.open(address, self._on_channel_event, self._on_channel_ready, self._on_channel_lost)
        except Exception as exc:  # e.g. no unix sockets here: the host's own channel carries on
            self._channel_note = f"cannot connect to {address}: {exc or type(exc).__name__}"
            log.info("no second channel to Neovim: %s", self._channel_note)

    def _on_channel_ready(self, channel: NvimChannel) -> None:
        editor = self._start().editor
        editor.channel = channel
        # from now on Lua sends keystroke events there (it sends the next window whole)
        if channel.id is not None:
            editor.update(updates.UseChannel(channel=channel.id))

    def _live_channel_id(self) -> int | None:
        """The worker's own channel to Neovim while it is connected (the editor holds it)."""
        channel = self._running.editor.channel if self._running is not None else None
        return channel.id if channel is not None and channel.connected else None

    def _on_channel_lost(self) -> None:
        self._channel_note = "it was closed"
        if self._running is not None:
            self._running.editor.channel = None

    @guarded
    def _on_channel_event(self, name: str, payload: Any) -> None:
        """An event on the worker's channel: handled right here on the worker loop."""
        self._channel_events += 1
        self._dispatch(name, payload, _call_now)

    def _start_hint(self, name: str) -> str | None:
        """How to start backend `name`'s server from Neovim (the first "cannot reach" says it)."""
        if self.config is None or name not in self.config.backends:
            return None
        from ..health.backend import start_hint

        return start_hint(name, self.config.backends[name])

    def _use_config(self, change: Change) -> None:
        """A backend switch took effect (runs on the worker loop): over the options in force,
        so options setup() gave while the server started stay."""
        cfg = change(self.config) if self.config is not None else None
        if cfg is None:
            return
        self.config = cfg
        self._start().core.configure(cfg)

    def _configure(self, raw: Any, run: Callable[..., None]) -> None:
        running = self._start()
        core = running.core
        try:
            cfg = load_config(raw)
        except ConfigError as exc:
            self.config, self.config_error = None, str(exc)
            log.warning("bad config: %s", exc)
            # status() says so until setup() is called again (it said 'waiting' for the
            # snapshots this host drops); set before the message, so it never says otherwise
            # while the message is on screen
            running.editor.update(updates.BackendState(state="bad option", message=str(exc)))
            running.editor.update(updates.Notice(message=f"local-copilot: bad option: {exc}", level="error"))
            run(core.unconfigure)
            return
        self.config, self.config_error = cfg, None
        setup_logging(cfg.log_level)
        run(core.configure, cfg)

    def _snapshot(self, msg: protocol.SnapshotMsg) -> Snapshot | None:
        """The engine's snapshot of a snapshot message. Lua owns the window: it reads the
        buffer, picks the window's rows and decides when to send it whole. While the user types
        on one line it sends that line only (`base` = the seq of the last whole window it
        sent): the window per keystroke would cost Neovim and the host a decode of ~260 lines
        each. The host keeps the last whole window of each buffer exactly as sent (every one,
        answered or not) and only applies that line to it; it decides nothing about the window.
        Lua sends the window whole again to a new host and after a channel switch; a base
        missing here all the same (a message lost) makes the host ask for it (Resync)."""
        buf, seq = msg.buf, msg.seq
        if seq < self._seqs.get(buf, 0):
            # the same Lua sent a newer one already: it came first on the worker's channel
            # while this one waited on the host's (only while Lua switches channels)
            return None
        self._seqs[buf] = seq
        if msg.base is None:
            snap = protocol.to_snapshot(msg, msg.lines or [""])
            self._windows[buf] = snap
            return snap
        base = self._windows.get(buf)
        if base is None or base.seq != msg.base or msg.first != base.first or msg.line is None:
            log.info("buffer %s: no window %s here for snapshot %s; asking for it whole", buf, msg.base, seq)
            self._start().editor.update(updates.Resync(buf=buf))
            return None
        lines = list(base.lines)
        lines[msg.row - base.first] = msg.line
        return protocol.to_snapshot(msg, lines)

    def _submit(self, snap: Snapshot) -> None:
        """On the worker loop: the core gets a buffer's snapshots oldest first. _snapshot
        drops an older one as it is read, but one read on the host's channel reaches this
        loop a hop later, maybe after a newer one read here on the worker's own channel (only
        while Lua switches channels): it would cancel the newer one's request."""
        if snap.seq < self._submitted.get(snap.buf, 0):
            return
        self._submitted[snap.buf] = snap.seq
        self._start().core.ghost.submit(snap)

    def _forget(self, buf: int) -> None:
        self._submitted.pop(buf, None)
        self._start().core.forget(buf)

    @pynvim.rpc_export("local_copilot_event", sync=False)
    @guarded
    def on_notification(self, name: str, payload: Any = None) -> None:
        """The keystroke path: Lua's vim.rpcnotify straight to this host (no Vimscript
        function in between, which converted every snapshot to Vim values first)."""
        self.on_event([name, payload])

    @pynvim.rpc_export("local_copilot_lsp", sync=False)
    @guarded
    def on_lsp(self, payload: Any) -> None:
        """A request of the in-process language server (lsp.lua), or {cancel = id}: answered
        later with an LspAnswer update (Lua never waits on it)."""
        running = self._start()
        if isinstance(payload, dict) and "cancel" in payload:
            running.worker.call(running.lsp.cancel, int(payload["cancel"]))
            return
        from .lsp_requests import LspRequest

        try:
            req = msgspec.convert(payload, LspRequest)
        except msgspec.ValidationError as exc:
            log.warning("dropped a language server request from Lua: %s", exc)
            return
        if self.config_error is not None:
            req = msgspec.structs.replace(req, snapshot=None)  # bad options: said when they came
        # no options yet: they may be on their way on the worker's channel (lsp_requests.py)
        running.worker.call(running.lsp.request, req)

    @pynvim.function("LocalCopilotEvent", sync=False)
    @guarded
    def on_event(self, args: list[Any]) -> None:
        worker = self._start().worker
        self._dispatch(args[0], args[1] if len(args) > 1 else None, worker.call)

    def _dispatch(self, name: str, payload: Any, run: Callable[..., None]) -> None:
        """One event from Lua, decoded once (protocol.py). `run(fn, *args)` runs `fn` on the
        worker loop: a hop from pynvim's thread, a plain call on the worker's own channel."""
        try:
            msg = protocol.decode(name, payload)
        except protocol.ProtocolViolation as exc:
            log.warning("dropped an event from Lua: %s", exc)
            return
        core = self._start().core
        match msg:
            case protocol.ConfigMsg(options=options):
                self._configure(options, run)
            case protocol.SnapshotMsg():  # snapshot, alternatives, typed_through
                if msg.shown:  # the suggestions Lua showed since its last request
                    run(core.stats.count, "shown", msg.shown)
                # read before anything may drop the snapshot: the window Lua sent whole is the
                # base its next one-line snapshots name, whether or not this one is answered
                snap = self._snapshot(msg)
                if snap is None or self.config is None:
                    return
                if isinstance(msg, protocol.Alternatives):
                    run(core.ghost.alternatives, snap)
                elif isinstance(msg, protocol.TypedThrough):
                    run(core.ghost.note_typed_through, snap, msg.text)
                elif isinstance(msg, protocol.Warm):
                    run(core.ghost.warm, snap)
                else:
                    run(self._submit, snap)
            case protocol.Backend(action=action, name=target):
                self._backend(action, target, run)
            case protocol.Chunk(path=path, lines=lines, around=around):
                run(core.add_chunk, path, lines, around)
            case protocol.Yank(path=path, lines=lines):
                run(core.add_yank, path, lines)
            case protocol.Cancel(buf=buf):
                run(core.ghost.cancel, buf)
            case protocol.Accepted(kind=kind):
                run(core.ghost.note_accept, kind)
            case protocol.NextEditRequest():
                if self.config is None:
                    return
                run(self._next_edit, msg)
            case protocol.NextEditNote(what=what):
                run(core.next_edits.note, what)
            case protocol.EditRequest(id=edit_id, buf=buf, spec=spec, attempt=attempt):
                if self.config is None:
                    why = f"fix the options first: {self.config_error or 'setup() was not called'}"
                    self._start().editor.update(updates.EditProgress(
                        update=updates.EditUpdate(id=edit_id, buf=buf, state="error", message=why)))
                    return
                run(core.edits.request, buf, edit_id, spec, attempt)
            case protocol.EditWarm(buf=buf, spec=spec):
                if self.config is not None:
                    run(core.edits.warm, buf, spec)
            case protocol.EditCancel(buf=buf, id=edit_id):
                run(core.edits.cancel, buf, edit_id)
            case protocol.PathChanged(path=path):
                run(core.privacy.forget_path, path)
            case protocol.Forget(buf=buf):  # the buffer was wiped: its window and seq are of no use
                self._windows.pop(buf, None)
                self._seqs.pop(buf, None)
                run(self._forget, buf)

    def _next_edit(self, msg: protocol.NextEditRequest) -> None:
        """On the worker loop: record the changes that came with the request, then ask."""
        next_edits = self._start().core.next_edits
        for r in msg.edits:
            next_edits.record(r.path, r.row, r.old, r.new, r.before, r.after)
        next_edits.request(Snapshot(buf=msg.buf, tick=msg.tick, row=msg.row, col=msg.col, first=msg.first,
                                    lines=msg.lines or [""], nlines=msg.nlines, ft=msg.ft, path=msg.path, seq=msg.seq,
                                    et=msg.et, sw=msg.sw, ts=msg.ts),
                           cwd=msg.cwd)

    def _backend(self, action: str, target: str, run: Callable[..., None]) -> None:
        running = self._start()
        if self.config is None:
            running.editor.update(updates.Notice(message=f"local-copilot: fix the options first: {self.config_error}",
                                                 level="error"))
            return
        if action == "model":  # (target: the model's name; '' = say which one is used)
            run(running.backends.set_model, self.config, target)
            return
        target = target or self.config.backend
        if action == "switch":
            run(running.backends.switch, self.config, target)
        elif action == "start":
            run(running.backends.start, self.config, target)
        elif action == "stop":
            run(running.backends.stop, target)
        elif action == "restart":
            run(running.backends.restart, self.config, target)

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
        if name == "privacy":  # why the file at args[1] is never sent ('' = it may be), for :checkhealth
            return self._privacy(str(args[1]), args[2] if len(args) > 2 else None)
        if name == "debug_state":  # tests and bench/: what is still running (0 when idle)
            return self._debug_state()
        if name == "backend_status":
            return self._backend_status()
        if name == "models":  # the completion of :LocalCopilotBackend model (args[1]: setup()'s options)
            return self._models(args[1] if len(args) > 1 else None)
        if name == "leaving":  # sync, so the servers are released before Neovim exits
            if self._running is not None:
                self._running.worker.run(asyncio.to_thread(self._running.backends.close), timeout=5)
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
        """Run `fn` on the worker loop, where the core mutates its stats, and wait for it."""
        worker = self._start().worker

        async def call() -> Any:
            return fn()

        return worker.run(call(), timeout)

    def _debug_state(self) -> dict[str, Any]:
        """Requests in flight and every live task on the worker loop (tests: nothing stuck)."""
        running = self._start()
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
                "channel": self._live_channel_id(),
                "channel_events": self._channel_events,
                # buffers something is kept for (a window of their text)
                "buffers": sorted(set(self._windows) | {b for b, st in core.buffers.items() if st.last}),
            }

        result: dict[str, Any] = self._on_worker(state)
        return result

    def _summary(self) -> dict[str, Any]:
        """The engine's stats, with the suggestions Lua showed since it last told (it tells
        with the next request; a stats call must not wait for that)."""
        core = self._start().core
        try:
            shown = int(self.nvim.exec_lua(protocol.LUA_TAKE_SHOWN) or 0)
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

        from ..health import report as diagnostics

        worker = self._start().worker  # it runs the probes
        config_error = None
        if raw is None:
            if self.config is not None:
                raw = msgspec.to_builtins(self.config)
            config_error = self.config_error
        stats = self._summary()
        coro = diagnostics.collect(raw, config_error=config_error, stats=stats, log_file=log_path(), editor=True)
        future = asyncio.run_coroutine_threadsafe(coro, worker.loop)
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
        sections: list[dict[str, Any]] = msgspec.to_builtins(report.sections)
        return sections

    def _channel_item(self) -> Item:
        chan = self._live_channel_id()
        if chan is not None:
            return Item(level="ok", message=f"keystrokes reach the host's network thread on its own "
                                    f"channel to Neovim (channel {chan})")
        return Item(level="info", message="keystrokes go through the python3 host's channel "
                                f"(its network thread has no channel of its own: {self._channel_note})",
                                advice=["this works, with a little more host CPU per keystroke"])

    def _backend_status(self) -> dict[str, Any]:
        core = self._start().core
        cfg = self.config
        if cfg is None:
            return {"error": self.config_error or "no configuration yet"}
        active = cfg.active
        backend = core.backend
        template = getattr(backend, "template", None)
        model = getattr(backend, "model", None)
        summary = core.stats.summary()["backends"].get(cfg.backend, {})
        backends = self._start().backends
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

        cfg = self.config
        if cfg is None and raw is not None:
            try:
                cfg = load_config(raw)
            except ConfigError as exc:
                return {"models": [], "error": str(exc)}
        if cfg is None:
            return {"models": [], "error": self.config_error or "no configuration yet"}
        try:
            models = self._start().worker.run(entry_models(cfg.backend, cfg.active, timeout_s=2.0), 3.0)
        except (BackendError, TimeoutError) as exc:
            return {"models": [], "error": str(exc) or type(exc).__name__}
        return {"models": msgspec.to_builtins(models), "error": None}

    def _next_edit_status(self, cfg: Config) -> dict[str, Any] | None:
        """The next-edit backend, its format and its server, while next edits are on."""
        if not cfg.next_edit.enabled:
            return None
        next_edits = self._start().core.next_edits
        name = cfg.next_edit.backend or cfg.backend
        detected = next_edits.format_name
        return {"backend": name, "url": cfg.backends[name].url,
                "format": cfg.next_edit.format or detected or "detected on first request",
                "server": self._start().backends.server_state(name)["state"]}
