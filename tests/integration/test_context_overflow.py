"""Requests must fit the server's context, cross-file chunks included (found by test_soak.py).

Against the real tiny llama-server (4096 tokens per slot; its byte-level vocabulary makes about
one token per byte). The engine calibrates its bytes-per-token estimate from the server's
`tokens_evaluated`; llama-server's /infill cuts the local window to its batch size (prefix
3/4 n_batch, suffix 1/4) before counting, so a long buffer reads as "few tokens for many bytes"
and the estimate climbs to its 5.0 ceiling. Cross-file chunks are then sized at 5 bytes per
token, llama-server's own cut of input_extra overshoots by 3 tokens, and every request is
answered "HTTP 400: request (4099 tokens) exceeds the available context size (4096 tokens)"
until the chunk ring changes.
"""

from __future__ import annotations

import asyncio

import pytest

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.servers.llama_cpp import LlamaServer
from local_copilot.snapshot import Snapshot

from ..fakes.editor import RecordingEditor

pytestmark = pytest.mark.integration

LINES = [f"line_0_{n} = {n} * {n}  # some text" for n in range(400)]


async def answered(editor: RecordingEditor, i: int, timeout: float = 30.0) -> None:
    """Until the request for the i-th snapshot has ended: its suggestion is final, or an error
    was shown (the assertions after tell which)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while len(editor.final) <= i and not editor.notes:
        assert loop.time() < end, f"no answer to request {i}"
        await asyncio.sleep(0.01)


def typed(i: int, first: int) -> Snapshot:
    """The buffer with `i` letters typed at row 250, col 5 (a new text each time: no cache hit)."""
    lines = list(LINES)
    lines[250] = lines[250][:5] + "q" * i + lines[250][5:]
    return Snapshot(buf=1, tick=i, row=250, col=5 + i, first=first, lines=lines[first:311], nlines=400,
                    path="/proj/a.py", seq=i)


async def test_requests_with_cross_file_chunks_fit_the_servers_context(llama_server: LlamaServer) -> None:
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": llama_server.url}}, "n_predict": 16,
                                  "speculative": False}))
    try:
        for i in range(6):  # typing in a long file: the estimate calibrates on these
            engine.ghost.submit(typed(i, first=50))
            await answered(editor, i)
        # the user visited other files (BufEnter/BufLeave send chunks around the cursor)
        for k in range(6):
            engine.add_chunk(f"/proj/other{k}.py", [f"other_{k}_{n} = {n} + {n}  # more" for n in range(128)], around=64)
        for i in range(6, 10):
            engine.ghost.submit(typed(i, first=50))
            await answered(editor, i)
        counters = engine.stats.summary()["counters"]
        assert editor.notes == [], (editor.notes, f"bytes per token estimate: {engine.prompts.estimator.bytes_per_token}")
        assert counters.get("errors", 0) == 0, counters
        assert len(editor.final) == 10 and all(set(t) == {"x"} for t in editor.final), editor.final
    finally:
        await engine.close()
