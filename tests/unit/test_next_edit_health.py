"""checkhealth's next-edit check (health/next_edit.py) when the check itself has a bug: one item
that says so, and the rest of the report stands."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from local_copilot.config import load_config
from local_copilot.health import next_edit as health

from ..fakes.fake_next_edit import FakeNextEditModel


async def test_a_bug_in_the_check_is_one_item_not_a_lost_report(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*_: Any) -> Any:
        raise KeyError("boom")  # stands for a bug in the request code

    monkeypatch.setattr(health, "ask", broken)
    srv = FakeNextEditModel("zeta2")
    try:
        cfg = load_config({"backends": {"llama.cpp": {"url": srv.url}}, "next_edit": {"enabled": True}})
        async with httpx.AsyncClient() as client:
            items = await health.next_edit_items(cfg, client, 5.0)
    finally:
        srv.close()
    assert items[-1].level == "error"
    assert items[-1].message == "the check itself failed: KeyError: 'boom'"
