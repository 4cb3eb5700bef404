"""Reading one answer (pipeline/reading.py), through the pipeline every surface awaits: the
caller's on_answer decides whether the answer is still wanted, partial texts reach on_text,
and a server that cannot be reached is one error completion, told to the user once. Against a
FAKE llama.cpp server (exact timing, disconnect detection)."""

from __future__ import annotations

from typing import Any

import pytest

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.pipeline.complete import Ask
from local_copilot.pipeline.reading import Stop

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import infill_stream, llama
from .test_engine import snap, wait_until

OPTIONS = {"speculative": False, "n_predict": 16}


def core_for(url: str) -> tuple[Core, RecordingEditor]:
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config({"backends": {"llama.cpp": {"url": url, "fim_template": "qwen"}}, **OPTIONS}))
    return core, editor


async def test_an_answer_the_caller_no_longer_wants_is_abandoned_and_its_stream_closed(fake: Any) -> None:
    server = fake(llama(infill_stream(["a", "b", "c", "d"], delay=0.2)))
    core, _ = core_for(server.url)
    answered: list[int] = []

    def on_answer() -> bool:
        answered.append(1)
        return True  # a newer request waited for this one to start

    with pytest.raises(Stop):
        await core.pipeline.complete(snap(1), Ask(), on_answer=on_answer)
    assert answered == [1]
    await wait_until(lambda: server.disconnects >= 1)  # the server stops writing
    await core.close()


async def test_an_answer_still_wanted_is_read_to_its_end_with_its_partial_texts(fake: Any) -> None:
    server = fake(llama(infill_stream(["a", "b", "c"], delay=0.05)))
    core, _ = core_for(server.url)
    partial: list[str] = []
    out = await core.pipeline.complete(snap(1), Ask(), on_text=partial.append, on_answer=lambda: False)
    assert out.text == "abc" and out.stop == "end" and out.error is None
    assert partial and all("abc".startswith(p) for p in partial)
    await core.close()


async def test_a_server_that_cannot_be_reached_is_one_error_told_once() -> None:
    core, editor = core_for("http://127.0.0.1:9")  # (the discard port: nothing listens)
    for seq in (1, 2):
        out = await core.pipeline.complete(snap(seq), Ask())
        assert out.stop == "error" and out.error is not None and out.text == ""
    assert editor.states[:1] == ["down"]
    assert len(editor.notes) == 1  # one message per episode
    assert core.stats["errors"] == 2
    await core.close()
