"""A buffer's request that names no slot on a server of several slots, read on when it is
superseded before the server has said where it runs.

llama-server says which slot runs a request on the answer's chunks (the last one at least;
current versions on every one, from the first token). A buffer's first request where every
slot has been used, and a buffer's request after its slot may have been emptied (a request of
this editor started in another slot meanwhile), go where the server chooses: the idle slot
holding most of its prompt, else the least recently used one, into which it loads the prompt
back from its host-memory cache. On a CPU the next key often comes while the server still
evaluates that request. Closed then, the request would never say its slot; the next one,
unnamed, would go to another slot and evaluate the whole window again, beside the first
evaluation (`make bench-real` at llama-server's default slots, typing at once in another
buffer: two windows evaluated at once, p50 several times -np 1's).

So such a request, superseded, is read on in the background, its text dropped, and the
buffer's next request waits until a chunk says the slot (Reader.placed) and names it: the
server finds the window cached there. Once the slot is said, the request is closed as any
superseded one. Once the first token has come without it, the prompt is cached in that slot
and the server would choose it again by similarity: the request is then read only briefly more
(GRACE_S, for its last chunk), and at most MAX_S in all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable

from ..backends import Chunk
from ..log import log
from ..transport.exchange import Exchange

__all__ = ["Placing"]


class Placing:
    # after the first token: the few tokens of a first part, at a CPU's speed
    GRACE_S = 0.25
    # in all, once superseded: a prompt that takes longer to evaluate is evaluated again
    MAX_S = 5.0

    def __init__(self, stream: AsyncGenerator[Chunk, None], exchange: Exchange, learn: Callable[[int], None]) -> None:
        self._stream, self._exchange, self._learn = stream, exchange, learn
        self._queue: asyncio.Queue[Chunk | Exception | None] = asyncio.Queue()
        self._texted = False  # a token came: the prompt is cached in its slot
        self._placed = False  # a chunk said the slot
        self._superseded = False
        self._ended = False  # the answer's last chunk (or its failure) was read
        loop = asyncio.get_running_loop()
        self.done: asyncio.Future[None] = loop.create_future()  # the reading has ended
        self._task = loop.create_task(self._pull())

    async def chunks(self) -> AsyncGenerator[Chunk, None]:
        """The answer's chunks, as the exchange's own; closing this before the last one reads
        the answer on in the background (see the module's doc)."""
        try:
            while True:
                item = await self._queue.get()
                if item is None:
                    return
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:
            self._supersede()

    @property
    def waits_for_slot(self) -> bool:
        """Whether the buffer's next request should wait for this one to say its slot: it is
        read on in the background (superseded), or its prompt is still being evaluated (a
        warm-up, or a first part the next key came during)."""
        return not self.done.done() and not self._placed and (self._superseded or not self._texted)

    def stop(self) -> asyncio.Task[None]:
        """Stop reading now (the host stops): the task that closes the stream, to wait for."""
        self._superseded = True
        self._task.cancel()
        return self._task

    def _supersede(self) -> None:
        if self._ended:
            return
        self._superseded = True
        loop = asyncio.get_running_loop()
        if self._placed:
            self._task.cancel()
        elif self._texted:
            loop.call_later(self.GRACE_S, self._task.cancel)
        else:
            loop.call_later(self.MAX_S, self._task.cancel)

    async def _pull(self) -> None:
        try:
            async for chunk in self._stream:
                if chunk.slot is not None and not self._placed:
                    self._learn(chunk.slot)
                    self._placed = True
                    if self._superseded:
                        break  # nobody reads it, and the next request can name the slot
                if chunk.text and not self._texted:
                    self._texted = True
                    if self._superseded:
                        asyncio.get_running_loop().call_later(self.GRACE_S, self._task.cancel)
                if chunk.done:
                    self._ended = True
                if not self._superseded:
                    self._queue.put_nowait(chunk)
                if chunk.done:
                    break
        except asyncio.CancelledError:
            pass  # given up on (see the module's doc): closed below as any superseded request
        except Exception as exc:  # noqa: BLE001 - the reader judges it; read on alone, nobody is told
            self._ended = True
            if self._superseded:
                log.debug("superseded first request failed: %s", exc)
            else:
                self._queue.put_nowait(exc)
        finally:
            self._ended = True
            self._exchange.abort()
            self._queue.put_nowait(None)
            self.done.set_result(None)
            await self._stream.aclose()
