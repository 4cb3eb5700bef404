"""Failure messages per backend episode (notify.py): ghost text and next edits asking the same
server share one episode; another server has its own."""

from __future__ import annotations

from local_copilot.notify import Episodes


def test_one_message_per_server_down_whoever_asks_it() -> None:
    sent: list[str] = []
    episodes = Episodes(lambda message, level: sent.append(message))
    ghost, next_edit = episodes.of("llama.cpp"), episodes.of("llama.cpp")
    assert next_edit.failure("ServerUnavailable", "next edit: llama.cpp: cannot reach it")
    assert not ghost.failure("ServerUnavailable", "llama.cpp: cannot reach it")
    assert sent == ["next edit: llama.cpp: cannot reach it"]
    # a second server (next_edit.backend) that is down too says so
    assert episodes.of("zeta").failure("ServerUnavailable", "next edit: zeta: cannot reach it")
    # the server is back: ghost text's answer ends the episode for next edits too
    ghost.success()
    assert not next_edit.in_episode
