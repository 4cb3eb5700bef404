"""The remote plugin: decode events from Lua, hand them to the core on the worker thread.

Handlers are async notifications (Lua never waits on Python while typing) and never raise:
an exception in a pynvim handler would print a stack trace into :messages.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import pynvim

from .. import updates
from ..config import Config, load_config
from ..errors import ConfigError
from ..log import log, setup_logging
from ..servers.backend_manager import Change
from ..snapshot import Snapshot
from . import protocol
from .channel import NvimChannel
from .queries import Queries
from .running import Running
from .windows import Windows

__all__ = ["LocalCopilotPlugin"]

F = TypeVar("F", bound=Callable[..., Any])
# how long the worker channel's first events wait for Lua's `switched` marker at most (it
# comes within milliseconds; a Lua that never sends it must not stop every keystroke)
HANDOVER_S = 2.0


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
        self._running: Running | None = None  # what runs once the host is used (see _start)
        self.config: Config | None = None
        self.config_error: str | None = None
        self.channel_events = 0  # events that came on it (tests: the keystroke path uses it)
        self.channel_note = "the host has not started it yet"  # why not, for :checkhealth
        # events that came on the worker's channel before Lua's `switched` marker (worker loop)
        self._held: list[tuple[str, Any]] | None = None
        # the snapshot windows Lua sent, and the order their snapshots reach the core in
        self.windows = Windows()
        self._queries = Queries(self)  # the sync calls (LocalCopilotCall)

    def _start(self) -> Running:
        if self._running is None:
            setup_logging()
            self._running = Running(self.nvim, self._use_config, self._start_hint)
            address = os.environ.get("NVIM") or ""
            if address:
                self._running.worker.call(self._open_channel, address)
            else:
                self.channel_note = "Neovim gave it no server address ($NVIM)"
        return self._running

    # -- the worker's own channel to Neovim (see channel.py) ---------------------------------

    def _open_channel(self, address: str) -> None:
        self._start().worker.loop.create_task(self._connect(address))

    async def _connect(self, address: str) -> None:
        # Neovim answers the new channel once it is not waiting on a call of the host's own
        self.channel_note = "Neovim has not answered it yet"
        try:
            await NvimChannel.open(address, self._on_channel_event, self._on_channel_ready, self._on_channel_lost)
        except Exception as exc:  # e.g. no unix sockets here: the host's own channel carries on
            self.channel_note = f"cannot connect to {address}: {exc or type(exc).__name__}"
            log.info("no second channel to Neovim: %s", self.channel_note)

    def _on_channel_ready(self, channel: NvimChannel) -> None:
        running = self._start()
        running.editor.channel = channel
        # from now on Lua sends keystroke events there (it sends the next window whole). Events
        # it sent before on the host's channel may still wait in pynvim's thread: those that
        # come here are held until Lua's `switched` marker, sent on the host's channel after
        # them, reaches the worker loop, so the core hears every event in the order Lua sent it
        # (a snapshot handled before the options sent ahead of it was dropped)
        if channel.id is not None:
            self._held = []
            running.worker.loop.call_later(HANDOVER_S, self._release, "no marker came")
            running.editor.update(updates.UseChannel(channel=channel.id))

    def _release(self, why: str = "") -> None:
        """On the worker loop: the events held since the switch, handled in the order they came."""
        held, self._held = self._held, None
        if held is None:
            return
        if why:
            log.info("worker channel: %d held events handled (%s)", len(held), why)
        for name, payload in held:
            self._dispatch(name, payload, _call_now)

    def live_channel_id(self) -> int | None:
        """The worker's own channel to Neovim while it is connected (the editor holds it)."""
        channel = self._running.editor.channel if self._running is not None else None
        return channel.id if channel is not None and channel.connected else None

    def _on_channel_lost(self) -> None:
        self.channel_note = "it was closed"
        if self._running is not None:
            self._running.editor.channel = None
        self._release("the channel closed")

    @guarded
    def _on_channel_event(self, name: str, payload: Any) -> None:
        """An event on the worker's channel: handled right here on the worker loop."""
        self.channel_events += 1
        if self._held is not None and name != "switched":
            self._held.append((name, payload))
            return
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
        """The engine's snapshot of a snapshot message (windows.py: Lua owns the window; a
        base window missing here makes the host ask for it whole)."""
        return self.windows.read(msg, lambda buf: self._start().editor.update(updates.Resync(buf=buf)))

    def _submit(self, snap: Snapshot) -> None:
        """On the worker loop: the core gets a buffer's snapshots oldest first (windows.py)."""
        if self.windows.in_order(snap):
            self._start().core.ghost.submit(snap)

    def _forget(self, buf: int) -> None:
        self.windows.forget_order(buf)
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
            case protocol.DefinitionsMsg(buf=buf, path=path, items=items):
                run(core.add_definitions, buf, path, [(d.path, d.text) for d in items])
            case protocol.EditsMsg(edits=edits):
                run(core.add_edits, [(e.buf, e.path, e.row, e.new, e.before, e.after) for e in edits])
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
            case protocol.Switched():  # every event Lua sent before the switch was handled
                run(self._release)
            case protocol.Forget(buf=buf):  # the buffer was wiped: its window and seq are of no use
                self.windows.forget(buf)
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
        """A sync call from Lua: status, :checkhealth, stats and the like (queries.py)."""
        return self._queries.answer(args)
