"""pipeline/fallback.py: which entry answers completions, when it is left for the next and
when an earlier one answers again (against real servers: tests/integration/test_fallback.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from local_copilot.errors import ProtocolError, ServerError, ServerUnavailable, TokenRefused
from local_copilot.pipeline.fallback import Chain, falls_back

from .test_engine import wait_until


class FakeProbedBackend:
    """A FAKE entry whose ready path says `up` (the chain asks nothing else of the backend)."""

    def __init__(self, up: bool = True) -> None:
        self.up = up
        self.probes = 0

    async def ready(self, timeout: float) -> bool:
        self.probes += 1
        return self.up


def chain(*, in_time: bool = True) -> tuple[Chain, list[tuple[str, str]], list[str], list[Any]]:
    """team, then local; what the user was told, the entries switched to, the probes asked."""
    said: list[tuple[str, str]] = []
    switched: list[str] = []
    asked: list[Any] = []

    async def answers_in_time(backend: Any, seconds: float) -> bool:
        asked.append((backend, seconds))
        return in_time

    entries: list[Any] = [("team", FakeProbedBackend()), ("local", FakeProbedBackend())]
    c = Chain(entries, 0.3, lambda msg, level: said.append((msg, level)),
              lambda name, _backend: switched.append(name), answers_in_time)
    return c, said, switched, asked


async def background_done() -> None:
    """Wait for whatever the chain started in the background (a probe of an earlier entry)."""
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    await asyncio.wait_for(asyncio.gather(*others, return_exceptions=True), 5.0)


@pytest.mark.parametrize("exc", [
    ServerUnavailable("refused", unreachable=True), ServerError("boom", status=500),
    TokenRefused("no", status=401), ProtocolError("not a completion server"),
])
def test_a_server_that_cannot_answer_is_left(exc: Exception) -> None:
    assert falls_back(exc)


def test_a_prompt_too_long_for_the_server_or_a_bug_here_leaves_nothing() -> None:
    assert not falls_back(ServerError("exceeds the available context size", status=400))
    assert not falls_back(ServerError("too long", status=400, prompt_tokens=9000))
    assert not falls_back(ValueError("not the server's"))


def test_lateness_is_judged_on_most_of_the_recent_requests() -> None:
    c, *_ = chain()
    assert c.name == "team" and c.has_next()
    assert c.leaves_if_late()  # no history yet: the one request there is
    c.timed(False)
    c.timed(False)
    assert not c.leaves_if_late()  # one late start of three
    c.timed(True)
    c.timed(True)
    assert c.leaves_if_late()  # three of five
    for _ in range(Chain.WINDOW):
        c.timed(True)
    for _ in range(Chain.WINDOW - 2):
        c.timed(False)
    assert not c.leaves_if_late()  # the older late ones left the window


async def test_falling_back_says_so_once_and_the_next_entry_answers() -> None:
    c, said, switched, _ = chain()
    c.timed(False)
    c.timed(False)
    c.fall_back("is down")
    assert said == [("local-copilot: team is down: completing with local", "warn")]
    assert switched == ["local"] and c.name == "local" and c.backend is c.entries[1][1]
    assert not c.has_next()
    assert c.leaves_if_late()  # the next entry's record starts empty
    c.close()


async def test_an_earlier_entry_up_and_in_time_answers_again() -> None:
    c, said, switched, asked = chain()
    c.fall_back("is down")
    c.recheck()  # just left: not asked before RECHECK_S has passed
    await background_done()
    assert asked == [] and c.entries[0][1].probes == 0 and c.name == "local"
    c.RECHECK_S = 0.0
    c.recheck()
    await wait_until(lambda: c.name == "team")
    assert len(asked) == Chain.RETURN_AFTER and all(a == (c.entries[0][1], 0.3) for a in asked)
    assert said[-1] == ("local-copilot: team answers again: completing with it instead of local", "info")
    assert switched == ["local", "team"]
    c.timed(True)
    assert not c.leaves_if_late()  # what it showed counts: one late request does not leave it
    c.close()


async def test_an_earlier_entry_up_but_still_slow_stays_left() -> None:
    c, said, switched, asked = chain(in_time=False)
    c.fall_back("is late")
    c.RECHECK_S = 0.0
    c.recheck()
    await wait_until(lambda: len(asked) == 1)
    c.close()
    assert c.name == "local" and switched == ["local"] and len(said) == 1


async def test_an_earlier_entry_still_down_is_not_asked_the_request() -> None:
    c, said, switched, asked = chain()
    c.entries[0][1].up = False
    c.fall_back("is down")
    c.RECHECK_S = 0.0
    c.recheck()
    await wait_until(lambda: c.entries[0][1].probes == 1)
    c.close()
    assert asked == [] and c.name == "local" and len(said) == 1


async def test_the_first_entry_answering_asks_no_earlier_one() -> None:
    c, _, _, asked = chain()
    c.RECHECK_S = 0.0
    c.recheck()
    await background_done()
    assert asked == [] and c.entries[0][1].probes == 0 and c.name == "team"
