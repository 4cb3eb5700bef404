"""The composition root: everything the host runs, built and configured together.

One `Core` per host (and one per `local-copilot complete`): the completion pipeline every
surface shares (pipeline/), the ghost-text strategy (ghost/), next edits (next_edit/),
instruction edits (instruct/), the privacy gate, the per-buffer sessions and the stats. The
adapter (nvim/plugin.py) hands it the user's options and the editor's events; everything here
runs on the worker's asyncio loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

from .backends import Backend, make_backend
from .config import Config
from .ghost.engine import Engine
from .ghost.session import Session
from .instruct.runner import EditRunner
from .next_edit.request import NextEdits
from .notify import Episodes
from .pipeline.complete import Pipeline
from .pipeline.prepare import Preparer
from .pipeline.reading import Reader
from .privacy.gate import Gate
from .stats import Stats
from .transport.access import async_client
from .updates import Editor, notices

__all__ = ["Core"]


class Core:
    CLOSE_WAIT_S = 1.0  # the most a closing host waits for its cancelled requests to stop

    def __init__(self, editor: Editor, start_hint: Callable[[str], str | None] | None = None) -> None:
        # start_hint: how this surface starts a backend's server that does not answer
        self.editor = editor
        self.config: Config | None = None
        self._client: httpx.AsyncClient | None = None
        self.stats = Stats()
        # failure messages, one per episode of each backend (shared with next edits)
        self.episodes = Episodes(notices(editor))
        self.prompts = Preparer()  # snapshots into requests (pipeline/prepare.py)
        self.privacy = Gate(editor, self.prompts.ring)  # what may be sent (privacy/gate.py)
        reader = Reader(editor, self.prompts.learn, self.stats, self.episodes.of(""), start_hint)
        self.pipeline = Pipeline(self.prompts, reader, self.stats, self.episodes)
        self.ghost = Engine(editor, self.pipeline, self.stats, self.privacy)
        # what is in flight and kept, per buffer: one session each (ghost/session.py), the ghost
        # text's and the other surfaces' requests alike
        self.buffers: dict[int, Session] = self.ghost.sessions
        self.next_edits = NextEdits(editor, self.stats, self.privacy, self.state, self.episodes)
        self.edits = EditRunner(editor, self.stats, self.privacy, self.buffers, self.state, lambda: self.config)

    @property
    def backend(self) -> Backend | None:
        return self.pipeline.backend

    def configure(self, cfg: Config) -> None:
        self.cancel_all()
        self.config = cfg
        active = cfg.active
        timeout = httpx.Timeout(active.timeout_ms / 1000, connect=2.0)
        if self._client is not None:
            asyncio.get_running_loop().create_task(self._client.aclose())
        # one long-lived client: keep-alive to the server, closed streams cancel generation
        # (every entry's trust: next edits may ask another entry's server through it; access.py)
        self._client = async_client(cfg.backends.values(), timeout=timeout)
        backend = make_backend(cfg.backend, active, self._client)
        fallbacks = [(name, make_backend(name, cfg.backends[name], self._client)) for name in cfg.fallback]
        self.pipeline.configure(cfg, backend, fallbacks)
        self.privacy.configure(cfg)
        self.next_edits.configure(cfg, backend, self._client)
        self.edits.configure(cfg, backend.slots)

    def unconfigure(self) -> None:
        """The options were refused: nothing runs or starts until they are good again."""
        self.cancel_all()
        self.config = None
        self.pipeline.config = None

    def sizing(self) -> dict[str, object]:
        """The active server's measured speeds and the context the last prompt used (stats and
        health show them)."""
        return {**self.prompts.speed.describe(), "context": dict(self.prompts.in_use),
                "latency_target_ms": self.config.latency_target_ms if self.config else None}

    def state(self, buf: int) -> Session:
        """`buf`'s session, made on first use (every request kind keeps its tasks there)."""
        return self.ghost.session(buf)

    def forget(self, buf: int) -> None:
        """The buffer is gone: its session stops everything and drops what is kept for it
        (its last suggestion's snapshot holds a whole window of its text)."""
        self.ghost.forget(buf)

    def cancel_all(self) -> None:
        self.ghost.cancel_all()

    def add_chunk(self, filename: str, lines: list[str], around: int | None = None) -> None:
        """Text of another buffer (entered, left, written, or around a cursor jump)."""
        if not self.privacy.refuses_file(filename):
            self.prompts.ring.add(filename, lines, around=around)

    def add_definitions(self, buf: int, path: str, items: list[tuple[str, str]]) -> None:
        """What the buffer's language servers found for the names near its cursor: (file, text)
        of each definition, judged by the policy (prompt/definitions.py)."""
        self.prompts.definitions.put(buf, path, items, self.prompts.ring.policy)

    def add_edits(self, edits: list[tuple[int, str, int, list[str], list[str], list[str]]]) -> None:
        """Changes the user finished, oldest first: (buffer, file, first row, new rows, rows
        above, rows below), each judged by the policy (prompt/recent_edits.py)."""
        for buf, path, row, new, before, after in edits:
            if not self.privacy.refuses_file(path):
                self.prompts.edits.put(buf, path, row, new, before, after, self.prompts.ring.policy)

    def add_yank(self, filename: str, lines: list[str]) -> None:
        if not self.privacy.refuses_file(filename):
            self.prompts.ring.chunk_from_yank(filename, lines)

    async def close(self) -> None:
        running = [t for state in self.buffers.values() for t in state.running()]
        running += self.pipeline.reader.stop_placing()
        self.cancel_all()
        self.next_edits.close()
        for state in self.buffers.values():
            state.cancel()
        if running:
            # cancelled tasks close their streams once they run again; a loop that ends first
            # destroys them mid-read
            await asyncio.wait(running, timeout=self.CLOSE_WAIT_S)
        await self.edits.close()
        self.pipeline.close()
        if self._client is not None:
            await self._client.aclose()
