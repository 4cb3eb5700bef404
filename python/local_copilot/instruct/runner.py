"""Instruction edits in flight: each runs as a task of its buffer's `Session` (ghost/session.py; keyed by the
edit's id, so several edits in different places run at once on a server with several
slots), streams its answer's code to the editor as `EditUpdate`s, and ends with the whole
answer or one clear message. Nothing here touches a buffer: the editor replaces the range only
when the user accepts (lua/local_copilot/edit.lua).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from contextlib import aclosing

import httpx

from ..backends.slots import Slots
from ..config import Config
from ..errors import BackendError, ConfigError, ModelLoading, ServerError, ServerUnavailable, TooLarge
from ..ghost.session import Session
from ..indentation import NEAR_AFTER, NEAR_BEFORE, buffer_style, restyle_lines
from ..log import log
from ..privacy.gate import Gate
from ..stats import Stats
from ..transport.access import async_client
from ..updates import Editor, EditProgress, EditUpdate
from . import answer
from .chat import ChatBackend, ChatChunk, chat_backend
from .prompt import EditSpec, build

__all__ = ["EditRunner", "EditUpdate"]

def _tokens(n: int) -> str:
    return f"{n} token" if n == 1 else f"{n} tokens"


class EditRunner:
    # streamed previews go to the editor at most this often (a diff is drawn per update)
    FRAME_S = 0.033
    # a retry asks at this temperature at least: the same one would give the same answer
    RETRY_TEMPERATURE = 0.7

    def __init__(self, editor: Editor, stats: Stats, privacy: Gate, buffers: Mapping[int, Session],
                 state: Callable[[int], Session], config: Callable[[], Config | None]) -> None:
        """`buffers`: the buffers' states, each kept while its buffer is (`state` makes one on
        first use); `config`: the options in effect, None while there are none (a bad option)."""
        self.editor = editor
        self.stats = stats
        self.privacy = privacy
        self._buffers = buffers
        self._state = state
        self._config = config
        self._client: httpx.AsyncClient | None = None
        self._chats: dict[str, ChatBackend] = {}
        self._slots: Slots | None = None  # the active entry's (configure)

    def configure(self, cfg: Config, slots: Slots | None = None) -> None:
        """New options: edits in flight stop (their previews say so), backends are made anew.
        `slots`: the active entry's (its ghost text's) map of the server's slots, which an edit
        sent to that entry tells too (an edit starting in one slot may empty the idle ones:
        backends/slots.py)."""
        self._slots = slots
        for buf, state in self._buffers.items():
            for edit_id, task in list(state.edits.items()):
                if not task.done():
                    self._show(EditUpdate(id=edit_id, buf=buf, state="error",
                                          message="stopped: the options or the backend changed; retry"))
            state.cancel("edit")
        for chat in self._chats.values():
            chat.close()
        self._chats.clear()
        if self._client is not None:  # made anew for the new options: another entry's trust
            asyncio.get_running_loop().create_task(self._client.aclose())
            self._client = None

    def _chat(self, cfg: Config) -> ChatBackend:
        name = cfg.edit.backend or cfg.backend
        chat = self._chats.get(name)
        if chat is None:
            if self._client is None:
                self._client = async_client(cfg.backends.values(), timeout=httpx.Timeout(10.0, connect=2.0))
            chat = self._chats[name] = chat_backend(name, cfg.backends[name], self._client,
                                                    timeout_s=cfg.edit.timeout_ms / 1000)
            if name == cfg.backend and self._slots is not None:
                chat.slots = self._slots  # (the same server as ghost text)
        return chat

    def _show(self, update: EditUpdate) -> None:
        self.editor.update(EditProgress(update=update))

    def _refused(self, spec: EditSpec) -> str | None:
        text = [*spec.before, *spec.lines, *spec.after, *(a for _, a in spec.history)]
        return self.privacy.policy.refusal(spec.path, text)

    def request(self, buf: int, edit_id: int, spec: EditSpec, attempt: int = 0) -> None:
        """Ask for edit `edit_id` (a new one, a retry or a follow-up: it replaces one in flight);
        `attempt`: how many times it was asked before (retries)."""
        state = self._state(buf)
        state.cancel("edit", edit_id=edit_id)
        cfg = self._config()
        if cfg is None:
            return
        why = self._refused(spec)
        if why is not None:
            self._show(EditUpdate(id=edit_id, buf=buf, state="error",
                                  message=f"not sent: {why}"))
            return
        temperature = cfg.edit.temperature if attempt == 0 else max(cfg.edit.temperature, self.RETRY_TEMPERATURE)
        state.start_edit(edit_id, self._run(cfg, buf, edit_id, spec, temperature))

    def warm(self, buf: int, spec: EditSpec) -> None:
        """The prompt without its instruction, evaluated by the server while the user types
        the instruction (where the server keeps a prompt cache: llama.cpp)."""
        cfg = self._config()
        if cfg is None or not cfg.edit.warm or self._refused(spec) is not None:
            return
        self._state(buf).start_edit_warm(self._warm(cfg, spec))

    def cancel(self, buf: int, edit_id: int) -> None:
        state = self._buffers.get(buf)
        if state is not None:
            state.cancel("edit", edit_id=edit_id)

    async def close(self) -> None:
        for chat in self._chats.values():
            chat.close()
        self._chats.clear()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _warm(self, cfg: Config, spec: EditSpec) -> None:
        try:
            chat = self._chat(cfg)
            limit = await chat.context_limit()
            if not chat.warms:
                return
            await chat.warm(build(spec, limit, cfg.edit.n_predict, warm=True).messages)
        except (BackendError, ConfigError, TooLarge, httpx.HTTPError) as exc:
            log.info("edit warm-up: %s", exc)  # the edit itself says what is wrong, if anything
        except Exception:  # a bug in a warm-up is the log's, not the user's
            log.exception("edit warm-up failed")

    LOADING_POLL_S = 1.0

    async def _loaded_limit(self, chat: ChatBackend, cfg: Config, waiting: Callable[[str], None]) -> int | None:
        """The chat server's context per request, once it has the entry's model loaded: a
        router-mode server (or a llama-swap-style proxy) loading it is waited for, the preview
        saying so, up to edit.timeout_ms (an edit is asked for once, so it waits rather than
        fails)."""
        deadline = asyncio.get_running_loop().time() + cfg.edit.timeout_ms / 1000
        while True:
            try:
                limit: int | None = await chat.context_limit()
                return limit
            except ModelLoading as exc:
                if asyncio.get_running_loop().time() >= deadline:
                    raise
                waiting(f"the server is loading {exc.model}")
                await asyncio.sleep(self.LOADING_POLL_S)

    async def _run(self, cfg: Config, buf: int, edit_id: int, spec: EditSpec, temperature: float) -> None:
        loop = asyncio.get_running_loop()
        started = time.perf_counter()

        def ms() -> int:
            return int((time.perf_counter() - started) * 1000)

        def fail(message: str) -> None:
            self.stats.count("edit_errors")
            self._show(EditUpdate(id=edit_id, buf=buf, state="error", elapsed_ms=ms(), message=message))

        # the answer's indentation is written the buffer's way; the selection's own lines stay
        style = buffer_style([*spec.before[-NEAR_BEFORE:], *spec.lines, *spec.after[:NEAR_AFTER]],
                             expandtab=spec.et, shiftwidth=spec.sw, tabstop=spec.ts)

        def placed(lines: list[str]) -> list[str]:
            return restyle_lines(lines, style, keep=spec.lines)

        self._show(EditUpdate(id=edit_id, buf=buf, state="waiting"))
        self.stats.count("edits")
        raw, tokens, finish, ended = "", 0, None, False
        try:
            chat = self._chat(cfg)
            prompt = build(spec, await self._loaded_limit(chat, cfg, lambda note: self._show(EditUpdate(
                id=edit_id, buf=buf, state="waiting", elapsed_ms=ms(), message=note))), cfg.edit.n_predict)
            exchange = await chat.chat(prompt.messages, prompt.max_tokens, temperature)
            last_draw, shown = float("-inf"), -1
            async with aclosing(exchange.chunks()) as chunks:
                async for chunk in chunks:
                    if chunk.text:
                        raw += chunk.text
                        tokens += 1
                    if isinstance(chunk, ChatChunk) and chunk.finish:
                        finish = chunk.finish
                    if chunk.done:
                        ended = True
                        break
                    now = loop.time()
                    if chunk.text and now - last_draw >= self.FRAME_S:
                        lines = answer.code_lines(raw, final=False)
                        if len(lines) != shown or now - last_draw >= 4 * self.FRAME_S:
                            last_draw, shown = now, len(lines)
                            self._show(EditUpdate(id=edit_id, buf=buf, state="streaming", tokens=tokens,
                                                  elapsed_ms=ms(), lines=placed(answer.reindent(lines, spec.lines))))
        except asyncio.CancelledError:
            raise
        except TooLarge as exc:
            fail(str(exc))
            return
        except ServerError as exc:
            if exc.context_overflow:
                log.info("edit: %s", exc)
                fail("selection too large: the server's context does not hold it; select less")
            else:
                fail(str(exc))
            return
        except (BackendError, ConfigError) as exc:
            log.info("edit %d: %s", edit_id, exc)
            if isinstance(exc, ServerUnavailable) and isinstance(exc.__cause__, httpx.ReadTimeout):
                # silent past edit.timeout_ms (a 503 while loading says so in its own words)
                fail(f"the server said nothing for {cfg.edit.timeout_ms / 1000:g} s (edit.timeout_ms)"
                     f"{' mid-answer' if tokens else ''}; nothing changed")
            elif tokens:  # the connection went in the middle of the answer
                fail(f"the answer broke off after {_tokens(tokens)}; nothing changed")
            else:
                fail(str(exc))
            return
        except Exception:  # a bug must not reach :messages as a stack trace
            log.exception("instruction edit failed")
            fail("internal error, see the log (:LocalCopilot log)")
            return
        if not ended and finish is None:
            fail(f"the answer broke off after {_tokens(tokens)}; nothing changed")
            return
        lines = answer.code_lines(raw, final=True)
        # (a selection of prose, e.g. a docstring's lines, may well be answered with prose)
        if not lines or (answer.is_prose(raw, spec.ft) and not answer.is_prose("\n".join(spec.lines), spec.ft)):
            words = " ".join(raw.split())
            log.info("edit: an answer without code: %r", raw[:2000])
            quote = f" (“{words[:40]}…”)" if len(words) > 40 else f" (“{words}”)" if words else ""
            fail(f"the model answered without code{quote}; nothing changed")
            return
        truncated = finish == "length"
        self._show(EditUpdate(id=edit_id, buf=buf, state="done", tokens=tokens, elapsed_ms=ms(),
                              lines=placed(answer.fit(lines, spec.lines)), truncated=truncated,
                              message=f"stopped at the limit of {tokens} tokens (edit.n_predict)" if truncated
                              else ""))
