"""One completion (pipeline/complete.py): the cache answers a spot asked before, a first part
is continued with only the rest of n_predict, and a caller's bug is told to the user once.
Against a FAKE llama.cpp server."""

from __future__ import annotations

from typing import Any

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.pipeline.complete import Ask

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import infill_stream, llama
from .test_engine import snap


def core_for(url: str, **options: Any) -> tuple[Core, RecordingEditor]:
    editor = RecordingEditor()
    core = Core(editor)
    core.configure(load_config({"backends": {"llama.cpp": {"url": url, "fim_template": "qwen"}},
                                "speculative": False, **options}))
    return core, editor


def completions(server: Any) -> list[dict[str, Any]]:
    return [body for path, body in server.requests if path == "/completion"]


async def test_the_cache_answers_a_spot_asked_before_without_a_request(fake: Any) -> None:
    server = fake(llama(infill_stream(["ok"])))
    core, _ = core_for(server.url)
    first = await core.pipeline.complete(snap(1), Ask())
    again = await core.pipeline.complete(snap(2), Ask())  # the same text around the cursor
    assert first.text == again.text == "ok" and not first.cached and again.cached
    assert len(completions(server)) == 1
    fresh = await core.pipeline.complete(snap(3), Ask(cached=False))
    assert fresh.text == "ok" and not fresh.cached and len(completions(server)) == 2
    await core.close()


async def test_a_first_part_cut_by_its_limit_is_continued_with_the_rest_of_n_predict(fake: Any) -> None:
    server = fake(llama(infill_stream(["a", "b"])))
    core, _ = core_for(server.url, n_predict=10, n_predict_first=2)
    first = await core.pipeline.complete(snap(1), Ask(first_part=True))
    assert first.text == "ab" and first.stop == "length" and first.continuable
    rest = await core.pipeline.complete(snap(1), Ask(), after=first)
    sent = completions(server)
    assert [b["n_predict"] for b in sent] == [2, 8]
    assert sent[1]["prompt"].endswith("ab")  # the same prompt plus the first part's text
    assert rest.text == "abab" and not rest.continuable
    await core.close()


async def test_a_callers_bug_is_told_once_per_episode(fake: Any) -> None:
    server = fake(llama(infill_stream(["ok"])))
    core, editor = core_for(server.url)
    core.pipeline.internal_error()
    core.pipeline.internal_error()
    assert [level for _, level in editor.notes] == ["error"]
    assert "internal error" in editor.notes[0][0] and core.stats["errors"] == 2
    await core.close()
