"""`:LocalCopilotBackend`: switch backends, starting their servers when they are not running.

The previous backend keeps answering while the new one loads; the switch happens when the new
one passes its health check. Servers started here are supervised (crash restarts with
backoff) and shared with other Neovim instances through the supervisor's lock files.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import msgspec

from ..backend_config import BackendConfig
from ..config import Config
from ..errors import BackendError, LocalCopilotError
from ..log import log
from ..server_options import server_options
from ..transport.access import async_client, auth_headers
from .auto import detect_backend
from .server_status import ServerEvent
from .supervisor import Supervisor

__all__ = ["BackendManager", "Change"]

Notify = Callable[[str, str], None]
# what a command changes, applied to the options in force when it takes effect (a server may
# take minutes to start, and setup() or a language client's settings may change the options
# meanwhile: the command's own copy of them would undo that); None when it no longer applies
Change = Callable[[Config], Config | None]
PROGRESS_EVERY_S = 3.0


class BackendManager:
    """Runs on the worker loop. `apply(change)` applies `change` (another active backend,
    another model) to the options in force."""

    def __init__(self, notify: Notify, apply: Callable[[Change], None], ready: Callable[[str], None]) -> None:
        self._notify = notify
        self._apply = apply
        self._ready = ready
        self.supervisors: dict[str, Supervisor] = {}
        self.pending: str | None = None  # a backend whose server is loading
        self._task: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None  # the last :LocalCopilotBackend stop
        self._starting: asyncio.Task[None] | None = None  # the last :LocalCopilotBackend start

    # -- commands ------------------------------------------------------------------------

    def switch(self, cfg: Config, name: str) -> None:
        if name != "auto" and name not in cfg.backends:
            self._notify(f"local-copilot: unknown backend {name!r}; choose one of: auto, "
                         f"{', '.join(sorted(cfg.backends))}", "error")
            return
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = asyncio.get_running_loop().create_task(self._switch(cfg, name))

    def start(self, cfg: Config, name: str) -> None:
        """Start backend `name`'s server when it does not answer, without making it the active
        one (e.g. the next-edit backend beside the ghost-text one)."""
        if name not in cfg.backends:
            self._notify(f"local-copilot: unknown backend {name!r}; choose one of: {', '.join(sorted(cfg.backends))}",
                         "error")
            return
        self._starting = asyncio.get_running_loop().create_task(self._switch(cfg, name, use=False))

    async def _switch(self, cfg: Config, name: str, use: bool = True) -> None:
        if name == "auto":
            # its probes run programs and wait on them: not on this loop, which carries completions
            choice = await asyncio.to_thread(detect_backend, cfg.backends)
            self._notify(f"local-copilot: auto chose {choice.backend}: {choice.reason}", "info")
            name = choice.backend
        target = msgspec.structs.replace(cfg, backend=name)
        backend = cfg.backends[name]
        opts = server_options(backend)
        sup: Supervisor | None = self.supervisors.get(name)
        if sup is None and opts.recipe != "none":
            try:
                sup = Supervisor(name, backend, opts, on_event=self._on_event)
            except LocalCopilotError:
                sup = None  # a remote URL: not ours to start or share
        if await _healthy(backend.url, backend.kind, backend):
            if sup is not None:
                # a server another Neovim started: count us as a user so it outlives them
                status = await asyncio.to_thread(sup.attach)
                if status.state in ("ready", "starting") and status.pid is not None:
                    self.supervisors[name] = sup
                    sup.start_watch_thread()
            self._switched(target, name, "already running", use)
            return
        if sup is None:
            how = "has no launch recipe (server.recipe = 'none')" if opts.recipe == "none" else "is not on this machine"
            self._notify(f"local-copilot: {name} does not answer at {backend.url} and {how}; start it yourself",
                         "error")
            return
        self.supervisors[name] = sup
        self.pending = name
        started = time.monotonic()
        last = [0.0]

        def progress(elapsed: float, line: str) -> None:
            if elapsed - last[0] >= PROGRESS_EVERY_S:
                last[0] = elapsed
                tail = f": {line}" if line else ""
                self._notify(f"local-copilot: starting {name}... {elapsed:.0f}s{tail}", "info")

        self._notify(f"local-copilot: starting {name}; completions keep coming from {cfg.backend} "
                     "until it is ready", "info")
        try:
            status = await sup.start_async(progress)
        except LocalCopilotError as exc:
            self._notify(f"local-copilot: {exc}", "error")
            return
        finally:
            self.pending = None
        for note in sup.recipe.notes:  # made by the start: e.g. extra_args that would bind elsewhere
            if note.startswith("WARNING: "):
                self._notify(f"local-copilot: {note.removeprefix('WARNING: ')}", "warn")
        sup.start_watch_thread()
        took = time.monotonic() - started
        self._switched(target, name, f"{status.state} after {took:.0f}s", use)

    def _switched(self, cfg: Config, name: str, how: str, use: bool = True) -> None:
        if not use:
            self._notify(f"local-copilot: {name} is up at {cfg.backends[name].url} ({how})", "info")
            self._ready(name)
            return
        self._apply(lambda now: msgspec.structs.replace(now, backend=name) if name in now.backends else None)
        self._notify(f"local-copilot: using {name} at {cfg.backends[name].url} ({how})", "info")
        self._ready(name)

    def set_model(self, cfg: Config, model: str) -> None:
        """`:LocalCopilotBackend model NAME`: the active entry asks for `model` from now on (for
        this session), once its server lists it; the next request probes the server again (the
        model's context, vocabulary and template)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = asyncio.get_running_loop().create_task(self._set_model(cfg, model))

    async def _set_model(self, cfg: Config, model: str) -> None:
        from ..backends.models import entry_models, model_problem

        name, entry = cfg.backend, cfg.active
        if not model:
            self._notify(f"local-copilot: {name} uses model {entry.model or '(the one its server runs)'}; "
                         ":LocalCopilotBackend model NAME sets another", "info")
            return
        try:
            models = await entry_models(name, entry)
        except BackendError as exc:
            self._notify(f"local-copilot: cannot list the models of {name}: {exc}", "error")
            return
        problem = model_problem(name, entry.url, model, models)
        if problem is not None:
            self._notify(f"local-copilot: {problem}", "error")
            return
        state = next((m.state for m in models if m.id == model), "")
        def use_model(now: Config) -> Config | None:
            if name not in now.backends:
                return None
            entries = {**now.backends, name: msgspec.structs.replace(now.backends[name], model=model)}
            return msgspec.structs.replace(now, backends=entries)

        self._apply(use_model)
        self._notify(f"local-copilot: {name} uses model {model}" + (f" ({state})" if state else ""), "info")

    def stop(self, name: str) -> None:
        sup = self.supervisors.get(name)
        if sup is None:
            self._notify(f"local-copilot: the server of {name} was not started by this Neovim; "
                         "use `local-copilot stop` for one started from a terminal", "warn")
            return

        def stop_now() -> bool:
            sup.close(release=False)
            return sup.stop()

        async def run() -> None:
            # stopping waits for the process to exit (up to its grace period, then SIGKILL):
            # in a thread, so completions on this loop go on meanwhile
            try:
                stopped = await asyncio.to_thread(stop_now)
            except LocalCopilotError as exc:
                self._notify(f"local-copilot: {exc}", "error")
                return
            self._notify(f"local-copilot: {'stopped' if stopped else 'nothing to stop for'} {name}", "info")

        self._stopping = asyncio.get_running_loop().create_task(run())

    def restart(self, cfg: Config, name: str) -> None:
        sup = self.supervisors.get(name)
        if sup is None:
            self.switch(cfg, name)
            return

        async def run() -> None:
            try:
                await asyncio.to_thread(sup.restart)
            except LocalCopilotError as exc:
                self._notify(f"local-copilot: {exc}", "error")
                return
            self._switched(msgspec.structs.replace(cfg, backend=name), name, "restarted")

        self._task = asyncio.get_running_loop().create_task(run())

    def server_state(self, name: str) -> dict[str, Any]:
        sup = self.supervisors.get(name)
        if sup is None:
            return {"state": "loading" if self.pending == name else "not managed"}
        st = sup.status()
        return {"state": st.state, "pid": st.pid, "users": st.users, "log": st.log_path, "error": st.error}

    def close(self) -> None:
        """This Neovim leaves: release the servers (the last user out stops them)."""
        for sup in self.supervisors.values():
            try:
                sup.close(release=True)
            except Exception:  # leaving must not fail
                log.exception("releasing %s", sup.name)

    def _on_event(self, event: ServerEvent) -> None:
        log.info("server %s: %s %s", event.backend, event.kind, event.message)
        if event.kind in ("crashed", "restarting", "failed"):
            self._notify(f"local-copilot: {event.message}", "error" if event.kind == "failed" else "warn")


async def _healthy(url: str, kind: str, entry: BackendConfig | None = None) -> bool:
    """Whether the server at `url` answers its kind's ready path, asked with `entry`'s trust
    and token (vLLM started with --api-key refuses /v1/models without it)."""
    from ..backends import registry

    path = registry.get(kind).ready_path
    try:
        async with async_client([entry] if entry else [], timeout=1.0, capped=False) as client:
            return (await client.get(url.rstrip("/") + path, headers=auth_headers(entry) if entry else None)
                    ).status_code == 200
    except httpx.HTTPError:
        return False
