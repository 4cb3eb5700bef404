"""Fixtures for the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ..fakes.fake_server import FakeServer


@pytest.fixture()
def fake() -> Iterator[Any]:
    servers: list[FakeServer] = []

    def make(script: Any) -> FakeServer:
        servers.append(FakeServer(script))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


