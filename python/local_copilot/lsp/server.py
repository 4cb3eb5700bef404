"""`local-copilot lsp`: a language server over stdio that answers `textDocument/completion` and
`textDocument/inlineCompletion` from the completion pipeline, for any editor.

It is one more client of `Pipeline.complete()` (pipeline/complete.py), through the same
composition root as the editor's host (core.py): the privacy policy decides what may be sent,
the prompt is sized to the server, the answer is post-processed, exactly as for ghost text.
pygls (with lsprotocol's types) speaks the protocol; in front of it rpc.py reads the messages
(every request is answered, whatever its shape) and documents.py keeps the documents in sync.

- Options: `initializationOptions` shaped as `setup()`'s (over the CLI's options file),
  changed by `workspace/didChangeConfiguration`, each over the options in force (options.py);
  bad options are one `window/showMessage` error and no items until good ones come. An
  options file that cannot be read is one error too, and the client's options are used.
  `start = true` starts and supervises the active backend's server as `:LocalCopilotBackend`
  does (BackendManager), released when the language server exits.
- A request runs as a task per document: a newer one, `$/cancelRequest` (pygls cancels the
  task) or closing the document cancels it, and a cancelled completion closes its HTTP stream,
  so the model server stops generating.
- Items: typed-through suggestions first (typed.py); else the completion at the cursor, and
  where the user asked for completions (trigger kind Invoked) sampled alternatives as ghost
  text's `next()` asks for them; made into items by items.py.
- Cross-file context: a request in another document than the last makes the text around
  where the user was asked in that one a chunk of the ring, as the editor sends a buffer it
  leaves.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, BinaryIO

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .. import __version__
from ..config import Config, load_config
from ..core import Core
from ..errors import ConfigError
from ..line_ends import split_lines
from ..log import log, setup_logging
from ..servers.backend_manager import BackendManager, Change
from ..updates import Notice, PrivacyVerdict, Update
from .documents import Documents, Spot
from .items import TRIGGER_CHARACTERS, completion_list, inline_list
from .options import ClientOptions
from .rpc import Rpc
from .suggest import MAX_ITEMS, suggestions
from .typed import Shown

__all__ = ["CompletionServer"]

_LEVELS = {"error": types.MessageType.Error, "warn": types.MessageType.Warning, "info": types.MessageType.Info}


class _Client:
    """The editor port of the core (updates.py's Editor) for a language client: notices
    become `window/showMessage`; refusals by the privacy policy go to the client's log. Drawing
    is the client's own: nothing here draws.

    The server's supervisor reports from its own threads (progress, crashes, restarts): their
    messages are handed to the event loop, which alone writes to the client."""

    def __init__(self, ls: LanguageServer) -> None:
        self._ls = ls
        self.loop: asyncio.AbstractEventLoop | None = None  # the server's, once it runs

    def update(self, u: Update) -> None:
        if isinstance(u, Notice):
            self.notify(u.message, u.level)
        elif isinstance(u, PrivacyVerdict) and u.reason is not None:
            message = f"local-copilot: not sent: {u.path or 'the text'} is private: {u.reason}"
            self._send(lambda: self._ls.window_log_message(
                types.LogMessageParams(type=types.MessageType.Info, message=message)))

    def notify(self, message: str, level: str) -> None:
        kind = _LEVELS.get(level, types.MessageType.Log)
        self._send(lambda: self._ls.window_show_message(types.ShowMessageParams(type=kind, message=message)))

    def _send(self, write: Callable[[], None]) -> None:
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            write()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(write)


def _filetype_on(cfg: Config, language: str) -> bool:
    """`filetypes` as setup() reads it: the document's language by name, else '*'."""
    on = cfg.filetypes.get(language)
    if on is None:
        on = cfg.filetypes.get("*")
    return on is not False


def _handler(method: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`method` as a function pygls can register (it marks what it registers, which a bound
    method does not let it do); a coroutine stays one, so pygls runs it as a task."""
    if inspect.iscoroutinefunction(method):
        async def run_async(params: Any) -> Any:
            return await method(params)

        return run_async

    def run(params: Any) -> Any:
        return method(params)

    return run


class CompletionServer:
    # sampled alternatives, as ghost text's next() asks for them
    MAX_ITEMS = MAX_ITEMS

    def __init__(self, base: dict[str, Any] | None = None, *, file_problem: str = "") -> None:
        self.options = ClientOptions(base or {})  # over the options file's table
        self.file_problem = file_problem  # why the options file gave nothing, said at initialize
        self.ls = LanguageServer("local-copilot", __version__,
                                 text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.client = _Client(self.ls)
        self.core = Core(self.client)
        self.docs = Documents()
        self.shown = Shown()
        self.running: dict[str, asyncio.Task[Any]] = {}  # uri -> its request's task
        self.manager: BackendManager | None = None
        self._started: set[str] = set()  # backends this server started or attached to
        self._asked: tuple[str, int] | None = None  # the document and row last asked in
        feature = self.ls.feature
        feature(types.INITIALIZE)(_handler(self.initialize))
        feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(_handler(self.change_configuration))
        feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=TRIGGER_CHARACTERS))(
            _handler(self.completion))
        feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())(
            _handler(self.inline_completion))
        feature(types.SHUTDOWN)(_handler(self.shutdown))
        # the messages are read, and the documents kept, in front of pygls (rpc.py, documents.py)
        self.rpc = Rpc(self.ls, {types.TEXT_DOCUMENT_DID_OPEN: self.did_open,
                                 types.TEXT_DOCUMENT_DID_CHANGE: self.did_change,
                                 types.TEXT_DOCUMENT_DID_CLOSE: self.did_close})

    # -- options -----------------------------------------------------------------------------

    def initialize(self, params: types.InitializeParams) -> None:
        self.client.loop = asyncio.get_running_loop()
        if self.file_problem:
            log.warning("options file: %s", self.file_problem)
            self.client.notify(f"local-copilot: {self.file_problem}; using the client's options alone", "error")
        self._configure(params.initialization_options, initial=True)

    def change_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        self._configure(params.settings)

    def _configure(self, value: Any, *, initial: bool = False) -> None:
        try:
            opts = self.options.offer(value, initial=initial)
            if opts is None:
                return
            cfg = load_config(opts.raw)
        except ConfigError as exc:
            self.options.refuse(value, initial=initial)
            log.warning("bad config: %s", exc)
            self._cancel_all()
            self.core.unconfigure()
            self.client.notify(f"local-copilot: bad option: {exc}", "error")
            return
        self.options.take()
        setup_logging(cfg.log_level)
        self._cancel_all()
        self.shown = Shown()
        self.core.configure(cfg)
        if opts.start:
            self._start(cfg)

    def _start(self, cfg: Config) -> None:
        """Start the active backend's server unless it answers, and supervise it (restarts
        after a crash); this server counts as one of its users until it exits."""
        if cfg.backend in self._started:
            return
        if self.manager is None:
            self.manager = BackendManager(self.client.notify, self._change, lambda name: None)
        self._started.add(cfg.backend)
        self.manager.start(cfg, cfg.backend)

    def _change(self, change: Change) -> None:
        """What the backend's supervisor changed, over the options in force."""
        cfg = change(self.core.config) if self.core.config is not None else None
        if cfg is not None:
            self.core.configure(cfg)

    # -- documents ---------------------------------------------------------------------------

    def _encoding(self) -> str:
        return self.ls.workspace.position_encoding or types.PositionEncodingKind.Utf16

    def did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        self.docs.open(params.text_document)

    def did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        self.docs.change(params, self._encoding())

    def did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        self._cancel(uri)
        self.shown.forget(uri)
        buf = self.docs.close(uri)
        if buf is not None:
            self.core.forget(buf)

    # -- requests ----------------------------------------------------------------------------

    async def completion(self, params: types.CompletionParams) -> types.CompletionList | None:
        invoked = params.context is not None and params.context.trigger_kind == types.CompletionTriggerKind.Invoked
        got = await self._latest(params.text_document.uri, params.position, invoked)
        if got is None:
            return None
        spot, texts = got
        caps = self.ls.client_capabilities.text_document
        item_caps = caps.completion.completion_item if caps and caps.completion else None
        snippets = bool(item_caps and item_caps.snippet_support)
        modes = item_caps.insert_text_mode_support.value_set if item_caps and item_caps.insert_text_mode_support else []
        return completion_list(texts, params.position, indent=spot.indent, language=spot.language,
                               snippets=snippets, adjusts=types.InsertTextMode.AdjustIndentation in modes)

    async def inline_completion(self, params: types.InlineCompletionParams) -> types.InlineCompletionList | None:
        invoked = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        got = await self._latest(params.text_document.uri, params.position, invoked)
        return None if got is None else inline_list(got[1], params.position)

    async def _latest(self, uri: str, position: types.Position, invoked: bool) -> tuple[Spot, list[str]] | None:
        """The suggestions at `position` of `uri`; a request for the same document that is
        still running is cancelled (its answer would be for a place the user has left)."""
        self._cancel(uri)
        task = asyncio.current_task()
        assert task is not None
        self.running[uri] = task
        try:
            return await self._suggestions(uri, position, invoked)
        finally:
            if self.running.get(uri) is task:
                del self.running[uri]

    async def _suggestions(self, uri: str, position: types.Position, invoked: bool
                           ) -> tuple[Spot, list[str]] | None:
        cfg, pipeline = self.core.config, self.core.pipeline
        if cfg is None or pipeline.backend is None:
            return None  # bad options: said when they came
        spot = self.docs.spot(self.docs.find(uri), position, cfg, self._encoding())
        self._moved(uri, spot.snap.row)
        if not _filetype_on(cfg, spot.language) or self.core.privacy.refuses(spot.snap):
            self.shown.forget(uri)
            return spot, []
        have = [t for t in (pipeline.recheck(spot.snap, rest) for rest in self.shown.rests(uri, spot)) if t]
        texts = await suggestions(self.core, spot.snap, invoked, have)
        self.shown.keep(uri, spot, texts)
        return spot, texts

    def _moved(self, uri: str, row: int) -> None:
        """A request in another document than the last: the text around where the user was
        asked in that one becomes cross-file context, as the editor sends a buffer it leaves
        (the ring takes nothing of a file the privacy policy refuses)."""
        left, self._asked = self._asked, (uri, row)
        if left is None or left[0] == uri or self.core.config is None or not self.core.config.context.extra_tokens:
            return
        doc = self.docs.get(left[0])
        if doc is not None and doc.path:
            self.core.add_chunk(doc.path, split_lines(doc.text), around=left[1])

    def _cancel(self, uri: str) -> None:
        task = self.running.pop(uri, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    def _cancel_all(self) -> None:
        for uri in list(self.running):
            self._cancel(uri)

    # -- the end -----------------------------------------------------------------------------

    async def shutdown(self, params: None) -> None:
        self._cancel_all()
        await self.core.close()
        await asyncio.to_thread(self.release)

    def release(self) -> None:
        """Leave the servers this one started (the last user out stops them)."""
        if self.manager is not None:
            self.manager.close()
            self.manager = None

    def serve(self, stdin: BinaryIO, stdout: BinaryIO) -> int:
        """Answer on `stdin`/`stdout` until the client says exit or goes away; the exit code
        (0 after `shutdown`, else 1)."""
        try:
            return self.rpc.serve(stdin, stdout)
        finally:
            self.release()
