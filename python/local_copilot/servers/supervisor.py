"""Start, share, watch and stop a model server for one backend.

One `Supervisor` per backend per process (the Neovim host, or the CLI). Several Neovim
instances on the machine share one server: the first starts it, the others attach (its pid is
alive and its health check answers); each registers as a user, and the server stops when the
last user is gone (after `keep_alive_s`), which a small janitor process beside the server
enforces even when Neovim is killed (see janitor.py). A server started from the terminal
(`local-copilot start`) is pinned: it runs until `local-copilot stop`.

Files (directories.py): state, users and lock in the runtime dir (`LOCAL_COPILOT_RUNTIME_DIR`, else platformdirs'
user runtime dir, else a temp dir), output in `<log dir>/servers/<backend>.log` (rotated, two
old files kept). Servers always bind 127.0.0.1.

Blocking calls (start, stop, restart) are meant for a worker thread; `start_async` and
`watch_async` wrap them for asyncio. Progress and events (server_status.py) are callbacks,
called from whichever thread runs the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from ..errors import ServerStartError
from ..server_options import ServerOptions, server_options
from ..transport.access import sync_client
from .detached import start_detached
from .directories import runtime_dir, server_log_dir
from .janitor import rotate
from .ports import port_free, port_owner
from .programs import INSTALL_HINTS
from .recipes import Recipe, check_ollama_model, local_port, make_recipe
from .registry import ServerFiles, kill_group, pid_alive
from .server_log import error_quote, model_failed, tail_lines
from .server_status import EventFn, EventKind, ProgressFn, ServerEvent, ServerStatus

__all__ = ["Supervisor"]

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # .../python, for the janitor's sys.path
KEEP_LOGS = 2
PROGRESS_EVERY_S = 0.5
POLL_S = 0.1
STOP_TIMEOUT_S = 15.0
MAX_BACKOFF_S = 60.0


def _resolve_exe(exe: str, env: Mapping[str, str]) -> str | None:
    if os.sep in exe:
        return exe if os.access(exe, os.X_OK) and not os.path.isdir(exe) else None
    return shutil.which(exe, path=env.get("PATH"))


class Supervisor:
    """Manage the server of backend `name` (`cfg` is its BackendConfig)."""

    def __init__(self, name: str, cfg: Any, options: ServerOptions | None = None, *,
                 env: Mapping[str, str] | None = None, state_dir: str | os.PathLike[str] | None = None,
                 log_dir: str | os.PathLike[str] | None = None, on_event: EventFn | None = None,
                 recipe: Recipe | None = None) -> None:
        self.name = name
        self.cfg = cfg
        self.options = options or server_options(cfg)
        self.env: dict[str, str] = dict(os.environ if env is None else env)
        _, self.port = local_port(name, cfg.url)  # a remote URL is not ours to start: raises
        self.url = f"http://127.0.0.1:{self.port}"
        # where its health is asked: the configured URL when it is https (a server started with
        # a certificate for the name the URL gives), with the entry's trust and token
        self.check_url = cfg.url.rstrip("/") if cfg.url.startswith("https://") else self.url
        self.files = ServerFiles(state_dir or runtime_dir(self.env), name, self.port)
        self.log_path = Path(log_dir or server_log_dir(self.env)) / f"{self.files.key.rsplit('-', 1)[0]}.log"
        self.on_event = on_event
        self.user_id = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._recipe = recipe
        self._busy = threading.Lock()  # one start/restart at a time in this process
        self._closing = threading.Event()
        self._watch_thread: threading.Thread | None = None
        self._want_running = False  # watch restarts only what was running for us
        self._quick_failures = 0
        self._failed = ""  # the give-up message once restarts are exhausted
        self._last_error = ""

    # ---------------------------------------------------------------- recipe and events

    @property
    def recipe(self) -> Recipe:
        """The launch recipe (found on first use: it may look for binaries and GPUs)."""
        if self._recipe is None:
            self._recipe = make_recipe(self.name, self.cfg, self.options, self.env)
        return self._recipe

    def _emit(self, kind: EventKind, message: str, elapsed: float = 0.0, log_line: str = "") -> None:
        if self.on_event is not None:
            with contextlib.suppress(Exception):  # a broken callback must not break supervision
                self.on_event(ServerEvent(backend=self.name, kind=kind, message=message, elapsed=elapsed,
                                          log_line=log_line))

    def latest_log_line(self) -> str:
        lines = tail_lines(self.log_path, 1, 8_000)
        return lines[-1][:200] if lines else ""

    # ---------------------------------------------------------------- health and status

    def health_path(self) -> str:
        if self._recipe is not None:
            return self._recipe.health_path
        from ..backends import registry

        return registry.get(self.cfg.kind).ready_path

    def is_healthy(self, timeout: float = 1.0) -> bool:
        try:
            with sync_client(self.cfg, timeout=timeout) as client:
                return client.get(self.check_url + self.health_path()).status_code == 200
        except httpx.HTTPError:
            return False

    def status(self) -> ServerStatus:
        state = self.files.read_state()
        base: dict[str, Any] = {"backend": self.name, "url": self.url, "log_path": str(self.log_path),
                                "notes": self._recipe.notes if self._recipe else []}
        if not state:
            if self.is_healthy(0.5):
                return ServerStatus(state="external", **base)
            return ServerStatus(state="failed" if self._failed else "stopped", error=self._failed, **base)
        base.update(kind=state.get("kind", ""), pid=state.get("pid"), pinned=bool(state.get("pinned")),
                    users=len(self.files.users()), argv=state.get("argv", []), exit_code=state.get("exit_code"),
                    log_path=state.get("log", base["log_path"]))
        if self.files.server_alive(state):
            up = time.time() - float(state.get("started_at", time.time()))
            return ServerStatus(state="ready" if self.is_healthy(0.5) else "starting", uptime_s=up, **base)
        return ServerStatus(state="failed" if self._failed else "crashed",
                            error=self._failed or self._last_error or self._exit_message(state), **base)

    # ---------------------------------------------------------------- start / attach

    def start(self, progress: ProgressFn | None = None, *, pin: bool = False, register: bool = True,
              timeout: float | None = None) -> ServerStatus:
        """Start the server, or attach to the one already running (or loading) on this port;
        return once it answers its health check. `register`: count this process as a user
        (the CLI does not); `pin`: keep it running with no users. Raises ServerStartError."""
        with self._busy:
            self._failed = ""
            status = self._start(progress, pin=pin, register=register, timeout=timeout)
            self._want_running = status.state in ("ready", "starting")
            return status

    def attach(self) -> ServerStatus:
        """Register as a user of a server that is already running; start nothing."""
        with self.files.locked():
            state = self.files.read_state()
            if self.files.server_alive(state):
                self.files.add_user(self.user_id)
                self._want_running = True
        return self.status()

    def _start(self, progress: ProgressFn | None, *, pin: bool, register: bool,
               timeout: float | None) -> ServerStatus:
        t0 = time.monotonic()
        with self.files.locked():
            state = self.files.read_state()
            attached = self.files.server_alive(state)
            if attached:
                assert state is not None
                if register:
                    self.files.add_user(self.user_id)
                if pin and not state.get("pinned"):
                    state["pinned"] = True
                    self.files.write_state(state)
            else:
                if not port_free(self.port):
                    if self.is_healthy(1.0):
                        self._emit("external", f"{self.name}: using the server already running at {self.url}")
                        return self.status()
                    owner = port_owner(self.port)
                    raise ServerStartError(
                        f"{self.name}: port {self.port} is held by another program"
                        f"{' (' + owner + ')' if owner else ''}, not a server local-copilot started; stop it "
                        f"or give backends.{self.name}.url another port")
                if self.recipe.detached:  # not ours once started (LM Studio's)
                    start_detached(self.name, self.recipe, self.env, self.log_path, lambda: self.is_healthy(1.0),
                                   progress, timeout or self.recipe.startup_timeout_s)
                    self._emit("external", f"{self.name}: started by {self.recipe.argv[0]}; it runs the server")
                    return self.status()
                state = self._spawn(self.recipe, pin=pin, register=register)
        pid = int(state["pid"])
        if attached:
            self._emit("attached", f"{self.name}: attached to the running server (pid {pid})")
        else:
            self._emit("starting", f"{self.name}: starting {state.get('kind')} on {self.url} (pid {pid})")
        limit = timeout or (self._recipe.startup_timeout_s if self._recipe else 0) or 600.0
        self._wait_ready(pid, limit, progress, t0, started=not attached)
        if state.get("kind") == "ollama" and self.cfg.model:
            problem = check_ollama_model(self.url, self.cfg.model)
            if problem:
                raise ServerStartError(f"{self.name}: {problem}")
        status = self.status()
        self._emit("ready", f"{self.name}: ready at {self.url} after {time.monotonic() - t0:.1f}s",
                   time.monotonic() - t0)
        return status

    def _spawn(self, recipe: Recipe, *, pin: bool, register: bool) -> dict[str, Any]:
        """Launch the janitor, which launches the server. Call with the lock held."""
        env = {**self.env, **recipe.env}
        exe = _resolve_exe(recipe.argv[0], env)
        if exe is None:
            hint = INSTALL_HINTS.get(recipe.kind, "")
            where = f" (backends.{self.name}.cmd)" if self.cfg.cmd else ""
            raise ServerStartError(f"{self.name}: {recipe.argv[0]} not found{where}"
                                   + (f"; install it: {hint}" if hint else ""))
        self.log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        rotate(self.log_path, KEEP_LOGS)
        self.files.prune_users()  # live users of a crashed server stay users of the new one
        if register:
            self.files.add_user(self.user_id)  # before the janitor looks, or it stops the server at once
        spec = {"argv": recipe.argv, "env": env, "log": str(self.log_path), "dir": str(self.files.dir),
                "backend": self.name, "port": self.port, "keep_alive_s": self.options.keep_alive_s,
                "pinned": pin, "stop_timeout_s": STOP_TIMEOUT_S, "keep_logs": KEEP_LOGS}
        code = (f"import sys; sys.path.insert(0, {str(PACKAGE_ROOT)!r}); "
                "from local_copilot.servers.janitor import main; sys.exit(main())")
        with open(self.log_path, "ab") as log:
            janitor = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=log, start_new_session=True)
        assert janitor.stdin and janitor.stdout
        janitor.stdin.write(json.dumps(spec).encode())
        janitor.stdin.close()
        line = janitor.stdout.readline()
        janitor.stdout.close()
        try:
            reply = json.loads(line or b"{}")
        except ValueError:
            reply = {}
        if "pid" not in reply:
            janitor.wait(5)
            if register:
                self.files.remove_user(self.user_id)
            raise ServerStartError(f"{self.name}: could not start {recipe.argv[0]}: "
                                   f"{reply.get('error') or error_quote(tail_lines(self.log_path))}")
        # the janitor lives on alone; reap it in the background so it never lingers as a zombie
        threading.Thread(target=janitor.wait, daemon=True, name="local-copilot-janitor-reaper").start()
        state = {"backend": self.name, "kind": recipe.kind, "pid": reply["pid"], "proc_start": reply.get("start"),
                 "janitor_pid": janitor.pid, "argv": recipe.argv, "url": self.url, "port": self.port,
                 "log": str(self.log_path), "started_at": time.time(), "pinned": pin, "owner": os.getpid(),
                 "exit_code": None}
        self.files.write_state(state)
        return state

    def _wait_ready(self, pid: int, timeout: float, progress: ProgressFn | None, t0: float, *,
                    started: bool) -> None:
        """Poll the health check (llama.cpp answers 503 while loading, vLLM refuses connections)
        until 200, the process dies, or `timeout`."""
        deadline = t0 + timeout
        last_progress = 0.0
        with sync_client(self.cfg, timeout=2.0) as client:
            while True:
                state = self.files.read_state()
                if not state or state.get("pid") != pid:
                    raise ServerStartError(f"{self.name}: the server was stopped before it was ready")
                if not self.files.server_alive(state):
                    raise self._death_error(pid)
                try:
                    if client.get(self.check_url + self.health_path()).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                now = time.monotonic()
                if progress is not None and now - last_progress >= PROGRESS_EVERY_S:
                    last_progress = now
                    line = self.latest_log_line()
                    with contextlib.suppress(Exception):
                        progress(now - t0, line)
                    self._emit("progress", f"{self.name}: loading ({now - t0:.0f}s)", now - t0, line)
                if now > deadline:
                    tail = tail_lines(self.log_path)
                    if started:
                        self._terminate(pid, state)
                    raise ServerStartError(
                        f"{self.name}: not ready after {timeout:.0f}s (last log line: {tail[-1] if tail else '-'}); "
                        f"raise backends.{self.name}.server.startup_timeout_s or see {self.log_path}",
                        log_tail=tail, log_path=str(self.log_path))
                if self._closing.wait(POLL_S):
                    raise ServerStartError(f"{self.name}: cancelled while starting")

    def _exit_message(self, state: dict[str, Any]) -> str:
        rc = state.get("exit_code")
        if rc is None:
            return "exited"
        if rc < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-rc).name}"
        return f"exited with code {rc}"

    def _death_error(self, pid: int) -> ServerStartError:
        # the janitor records the exit code a moment after the death; wait for it briefly
        deadline = time.monotonic() + 2.0
        state = self.files.read_state() or {}
        while state.get("exit_code") is None and time.monotonic() < deadline:
            time.sleep(0.02)
            state = self.files.read_state() or {}
        tail = tail_lines(self.log_path)
        quote = error_quote(tail)
        model = self.options.weights or self.cfg.model or "(the default preset)"
        if model_failed(tail):
            msg = (f"{self.name}: the server failed to load the model {model}: {quote} "
                   f"(check backends.{self.name}.model; full log: {self.log_path})")
        else:
            msg = (f"{self.name}: the server {self._exit_message(state)} while starting: {quote} "
                   f"(full log: {self.log_path})")
        self._last_error = msg
        return ServerStartError(msg, log_tail=tail, log_path=str(self.log_path))

    # ---------------------------------------------------------------- stop / release / restart

    def _terminate(self, pid: int, state: dict[str, Any] | None) -> None:
        start = state.get("proc_start") if state else None
        if not pid_alive(pid, start):
            return
        kill_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while pid_alive(pid, start):
            if time.monotonic() > deadline:
                kill_group(pid, signal.SIGKILL)
                deadline = time.monotonic() + 5.0
            time.sleep(0.02)

    def stop(self) -> bool:
        """Stop the server for everyone (`:LocalCopilotBackend stop`, `local-copilot stop`).
        Returns whether one was running."""
        self._want_running = False
        with self.files.locked():
            state = self.files.read_state()
            self.files.clear()
        if not state:
            return False
        alive = self.files.server_alive(state)
        self._terminate(int(state.get("pid") or 0), state)
        if alive:
            self._emit("stopped", f"{self.name}: stopped (pid {state.get('pid')})")
        return alive

    def release(self) -> bool:
        """This user leaves (Neovim exits). The server stops when no live user is left and it is
        not pinned: now with keep_alive_s 0, else the janitor does it after the delay.
        Returns whether it was stopped here."""
        self._want_running = False
        with self.files.locked():
            users = self.files.remove_user(self.user_id)
            state = self.files.read_state()
            last = (bool(state) and not users and not state.get("pinned")  # type: ignore[union-attr]
                    and self.options.keep_alive_s == 0)
            if last:
                self.files.clear()
        if last and state:
            self._terminate(int(state.get("pid") or 0), state)
            self._emit("stopped", f"{self.name}: stopped (last user left)")
        return bool(last)

    def restart(self, progress: ProgressFn | None = None, *, timeout: float | None = None) -> ServerStatus:
        """Stop and start again; the users stay (other Neovims keep using it, their watchers wait)."""
        with self._busy:
            with self.files.locked():
                state = self.files.read_state()
                if state:
                    state.update(restarting_at=time.time())
                    self.files.write_state(state)
            if state:
                self._terminate(int(state.get("pid") or 0), state)
            self._failed = self._last_error = ""
            self._quick_failures = 0
            status = self._start(progress, pin=bool(state and state.get("pinned")), register=True, timeout=timeout)
            self._want_running = True
            return status

    # ---------------------------------------------------------------- watching

    def check(self) -> ServerStatus | None:
        """One watch step: restart the server if it died under us, with exponential backoff;
        after `max_restarts` quick failures, give up with an error. Returns the status after
        a restart or give-up, else None (nothing to do)."""
        if not self._want_running or self._failed or self._closing.is_set():
            return None
        if not self._busy.acquire(blocking=False):
            return None  # a start/restart is under way in this process
        try:
            state = self.files.read_state()
            if state is None:  # stopped on purpose (stop, or the last user left)
                self._want_running = False
                return None
            if self.files.server_alive(state):
                if time.time() - float(state.get("started_at", 0)) > self.options.quick_failure_s:
                    self._quick_failures = 0
                return None
            if time.time() - float(state.get("restarting_at") or 0) < STOP_TIMEOUT_S + 5:
                return None  # another process is restarting it on purpose
            ran = float(state.get("exited_at") or time.time()) - float(state.get("started_at") or 0)
            self._quick_failures = self._quick_failures + 1 if ran < self.options.quick_failure_s else 1
            why = self._last_error or self._crash_message(state)
            self._emit("crashed", why)
            if self._quick_failures > self.options.max_restarts:
                self._failed = (f"{self.name}: gave up after {self.options.max_restarts} restarts "
                                f"(each died within {self.options.quick_failure_s:.0f}s); last: {why}; "
                                f"fix it and run :LocalCopilotBackend restart")
                self._want_running = False
                self._emit("failed", self._failed)
                return self.status()
            delay = min(self.options.restart_backoff_s * 2 ** (self._quick_failures - 1), MAX_BACKOFF_S)
            self._emit("restarting", f"{self.name}: restarting in {delay:.1f}s "
                                     f"(attempt {self._quick_failures}/{self.options.max_restarts})")
            if self._closing.wait(delay):
                return None
            try:
                self._last_error = ""
                # a no-op progress callback still turns on the "progress" events
                return self._start(lambda e, line: None, pin=bool(state.get("pinned")), register=True,
                                   timeout=None)
            except ServerStartError as exc:
                self._last_error = str(exc)
                return self.status()
        finally:
            self._busy.release()

    def _crash_message(self, state: dict[str, Any]) -> str:
        tail = tail_lines(self.log_path)
        quote = error_quote(tail) if tail else ""
        return f"{self.name}: the server {self._exit_message(state)}" + (f": {quote}" if quote else "")

    def watch(self, interval: float = 1.0) -> None:
        """Check every `interval` seconds until close(). Blocking: run it in a thread."""
        while not self._closing.wait(interval):
            with contextlib.suppress(Exception):  # never let the watcher die
                self.check()

    def start_watch_thread(self, interval: float = 1.0) -> threading.Thread:
        if self._watch_thread is None or not self._watch_thread.is_alive():
            self._watch_thread = threading.Thread(target=self.watch, args=(interval,), daemon=True,
                                                  name=f"local-copilot-watch-{self.name}")
            self._watch_thread.start()
        return self._watch_thread

    async def watch_async(self, interval: float = 1.0) -> None:
        """The watch loop as an asyncio task (each step runs in a worker thread)."""
        while not self._closing.is_set():
            await asyncio.to_thread(self.check)
            await asyncio.sleep(interval)

    async def start_async(self, progress: ProgressFn | None = None, **kw: Any) -> ServerStatus:
        return await asyncio.to_thread(self.start, progress, **kw)

    def close(self, release: bool = True) -> None:
        """Stop watching (and cancel a start in progress); by default also release()."""
        self._closing.set()
        if self._watch_thread is not None and self._watch_thread is not threading.current_thread():
            self._watch_thread.join(5)
        if release:
            self.release()
