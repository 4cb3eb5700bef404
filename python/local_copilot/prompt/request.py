"""What one completion request asks of a server, in no server's dialect: the text around the
cursor as prompt building cut it (prepare.py), and how much and how to answer. Each backend
turns it into its own wire format (backends/)."""

from __future__ import annotations

import msgspec

from .templates import ExtraChunk

__all__ = ["FimRequest"]


class FimRequest(msgspec.Struct, frozen=True, kw_only=True):
    prefix: str  # lines above the cursor line
    middle: str  # the cursor line up to the cursor
    suffix: str  # the rest of the cursor line and the lines below
    n_predict: int
    n_indent: int = 0
    t_max_predict_ms: int = 0
    path: str = ""
    filetype: str = ""  # the buffer's (the chat prompt names the language)
    # chunks of other files, oldest first (stable prompt start), for repo-level FIM
    extra: tuple[ExtraChunk, ...] = ()
    # alternatives: sample more freely, and ask for n candidates where the server can (OpenAI `n`)
    temperature: float | None = None
    n: int = 1
    seed: int | None = None  # distinct seeds make sampled alternatives differ, reproducibly
    # False: one answer instead of a stream, where the dialect can (llama.cpp). The pipeline
    # asks so of a server that writes the whole answer within a frame or two anyway.
    stream: bool = True
    # an unstreamed answer expected within a frame: awaited in poll() before the event loop
    # (Exchange.QUICK_ANSWER_S)
    quick: bool = False
    # the server slot to run in (llama-server's id_slot), None: the server's choice (backends/slots.py)
    slot: int | None = None
