"""What an answer says of the server, for the estimates the next prompts are fitted with.

The reader (reading.py) tells each as one event, `learn(said)`, and the preparer
(prepare.py: `Preparer.learn`) keeps it: the reader knows nothing of how the estimates are kept,
and nothing below the pipeline writes them.
"""

from __future__ import annotations

import msgspec

from ..prompt.request import FimRequest

__all__ = ["Overflow", "PromptSize", "Said", "Speed"]


class Speed(msgspec.Struct, frozen=True):
    """The server's counters of an answer (`timings`: prompt_n, prompt_ms, predicted_n,
    predicted_ms, ...); `client_timed`: the times are the client's own clock (the server gave
    counts only)."""

    timings: dict[str, float]
    client_timed: bool = False


class PromptSize(msgspec.Struct, frozen=True):
    """The prompt of `req` is `tokens` long as the server counted the whole of it."""

    req: FimRequest
    tokens: int


class Overflow(msgspec.Struct, frozen=True):
    """The server refused a prompt as too long (its count and its context, when it said);
    `req` None: one that was fitted again still did not fit."""

    req: FimRequest | None
    prompt_tokens: int | None
    context_tokens: int | None


Said = Speed | PromptSize | Overflow
