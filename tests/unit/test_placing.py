"""pipeline/placing.py: a buffer's request that names no slot, read on when it is superseded
before the server has said its slot (the server's own stream is faked here by an async
generator of the chunks llama-server sends: partial ones without a slot and the last with it,
as older versions do, or every one with it, as current ones do)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from local_copilot.backends import Chunk
from local_copilot.pipeline.placing import Placing


class _Exchange:
    def __init__(self) -> None:
        self.aborted = 0

    def abort(self) -> None:
        self.aborted += 1


def _answer(prompt_s: float, tokens: int, token_s: float, slot: int, log: list[str], *,
            slot_on_every: bool = False) -> AsyncGenerator[Chunk, None]:
    async def gen() -> AsyncGenerator[Chunk, None]:
        try:
            await asyncio.sleep(prompt_s)  # the prompt's evaluation
            for i in range(tokens):
                yield Chunk(text="x", slot=slot if slot_on_every else None)
                log.append(f"token {i}")
                await asyncio.sleep(token_s)
            yield Chunk(text="", done=True, slot=slot)
            log.append("last")
        finally:
            log.append("closed")
    return gen()


def _placing(stream: AsyncGenerator[Chunk, None], learned: list[int]) -> tuple[Placing, _Exchange]:
    ex = _Exchange()
    return Placing(stream, ex, learned.append), ex  # type: ignore[arg-type]


async def _superseded_during_its_prompt(placing: Placing) -> None:
    """The next key comes while the server evaluates the request's prompt."""
    chunks = placing.chunks()
    reader = asyncio.ensure_future(chunks.__anext__())
    await asyncio.sleep(0.01)
    assert placing.waits_for_slot  # its prompt is being evaluated
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    await chunks.aclose()


async def test_read_to_its_end_the_reader_gets_every_chunk_and_the_slot_is_learned() -> None:
    log: list[str] = []
    learned: list[int] = []
    placing, ex = _placing(_answer(0.01, 3, 0.001, 2, log), learned)
    texts = [c.text async for c in placing.chunks()]
    await placing.done
    assert texts == ["x", "x", "x", ""] and learned == [2] and ex.aborted == 1
    assert not placing.waits_for_slot


async def test_superseded_during_its_prompt_it_is_read_on_and_the_next_request_waits_for_its_slot() -> None:
    log: list[str] = []
    learned: list[int] = []
    placing, _ = _placing(_answer(0.05, 3, 0.001, 1, log), learned)
    await _superseded_during_its_prompt(placing)
    assert placing.waits_for_slot and learned == []
    await asyncio.wait_for(placing.done, 2)
    assert learned == [1] and log[-2:] == ["token 2", "closed"]  # read to its last chunk, then closed


async def test_superseded_after_its_first_token_it_is_closed_after_a_short_grace() -> None:
    log: list[str] = []
    learned: list[int] = []
    # a long answer: 1000 tokens of 10 ms
    placing, ex = _placing(_answer(0.0, 1000, 0.01, 3, log), learned)
    chunks = placing.chunks()
    first: Any = await chunks.__anext__()
    assert first.text == "x"
    assert not placing.waits_for_slot  # text is coming: its reader shows it, nobody waits
    await chunks.aclose()  # superseded
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await asyncio.wait_for(placing.done, 2)
    assert loop.time() - t0 <= Placing.GRACE_S + 0.2
    assert learned == [] and "closed" in log and ex.aborted == 1


async def test_a_slot_said_on_the_first_chunk_ends_the_wait_and_a_superseded_request_is_closed_at_once() -> None:
    log: list[str] = []
    learned: list[int] = []
    placing, ex = _placing(_answer(0.05, 1000, 0.01, 2, log, slot_on_every=True), learned)
    await _superseded_during_its_prompt(placing)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    # the first chunk says the slot: nothing more is read (no grace, not its 1000 tokens)
    await asyncio.wait_for(placing.done, 2)
    assert loop.time() - t0 <= 0.2
    assert learned == [2] and not placing.waits_for_slot and ex.aborted == 1
    assert "token 1" not in log and "closed" in log


async def test_a_failure_reaches_the_reader_unless_superseded() -> None:
    async def failing() -> AsyncGenerator[Chunk, None]:
        await asyncio.sleep(0)
        raise RuntimeError("the server broke")
        yield Chunk(text="")  # pragma: no cover

    placing, _ = _placing(failing(), [])
    with pytest.raises(RuntimeError, match="broke"):
        async for _ in placing.chunks():
            pass
    await placing.done


async def test_stopped_it_closes_its_stream_at_once() -> None:
    log: list[str] = []
    placing, ex = _placing(_answer(0.05, 1000, 0.01, 2, log), [])
    await _superseded_during_its_prompt(placing)
    task = placing.stop()  # the host stops
    await asyncio.wait([task], timeout=1)
    assert task.done() and placing.done.done() and "closed" in log and ex.aborted == 1
    assert "token 0" not in log
