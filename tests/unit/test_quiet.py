"""Issue 25 in the engine: an answer that only repeats the line above shows nothing and is
counted as quiet; the rest of a typed-through suggestion is post-processed again for the
line as it is after the typed text. Against a FAKE llama-server (/infill)."""

from __future__ import annotations

from typing import Any

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.snapshot import Snapshot

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import infill_stream, llama
from .test_engine import wait_until


def engine_asking(fake: Any, chunks: list[str]) -> tuple[Core, RecordingEditor]:
    """An engine whose server (a fake llama-server) streams `chunks` to every request, and the
    editor it draws in."""
    server = fake(llama(infill_stream(chunks)))
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}}))
    return engine, editor


def snap(seq: int, lines: list[str], row: int, line_col: int) -> Snapshot:
    return Snapshot(buf=1, tick=seq, row=row, col=line_col, first=0, lines=lines, seq=seq)


async def test_an_answer_that_only_repeats_the_line_above_is_quiet(fake: Any) -> None:
    engine, editor = engine_asking(fake, ["\n", "    total = 0"])
    engine.ghost.submit(snap(1, ["def f():", "    total = 0", ""], 1, len("    total = 0")))
    await wait_until(lambda: any(p.final for p in editor.plans))
    assert [p.text for p in editor.plans if p.final] == [""]
    assert engine.stats["quiet"] == 1
    await engine.close()


async def test_a_typed_through_rest_is_checked_against_the_new_line(fake: Any) -> None:
    engine, editor = engine_asking(fake, [])
    await wait_until(lambda: engine.backend is not None)
    # `total = 0` was shown after `    tot`; the user typed through to the line's end, and the
    # rest now repeats the line above: nothing is left to show
    engine.ghost.note_typed_through(snap(2, ["def f():", "    total = 0", ""], 1, len("    total = 0")),
                              "\n    total = 0")
    assert [(p.text, p.final, p.seq) for p in editor.plans] == [("", True, 2)]
    assert engine.stats["quiet"] == 1 and engine.stats["typed_through"] == 1
    # a rest that is still right for the new line is left as Lua shows it: no plan
    engine.ghost.note_typed_through(snap(3, ["def f():", "    tot", ""], 1, len("    tot")), "al = 0")
    assert len(editor.plans) == 1
    await engine.close()


async def test_a_quiet_answer_the_user_then_types_is_counted_as_a_false_one(fake: Any) -> None:
    # the model repeats the line above: quiet; the user then types that very line
    engine, editor = engine_asking(fake, ["\n", "    total = 0"])
    lines = ["def f():", "    total = 0", ""]
    engine.ghost.submit(snap(1, lines, 1, len("    total = 0")))
    await wait_until(lambda: any(p.final for p in editor.plans))
    assert engine.stats["quiet"] == 1
    typed = "    total = 0"
    for n in range(1, len(typed) + 1):  # Enter, then the line key by key
        engine.ghost.submit(snap(1 + n, ["def f():", "    total = 0", typed[:n], ""], 2, n))
    await wait_until(lambda: engine.stats["quiet_false"] == 1)
    assert engine.stats["quiet_false"] == 1
    await engine.close()


async def test_a_quiet_answer_the_user_types_past_is_not_a_false_one(fake: Any) -> None:
    engine, editor = engine_asking(fake, ["\n", "    total = 0"])
    engine.ghost.submit(snap(1, ["def f():", "    total = 0", ""], 1, len("    total = 0")))
    await wait_until(lambda: any(p.final for p in editor.plans))
    assert engine.stats["quiet"] == 1
    for n, line in enumerate(["    r", "    re", "    ret", "    return total"], start=2):
        engine.ghost.submit(snap(n, ["def f():", "    total = 0", line, ""], 2, len(line)))
    await wait_until(lambda: len(editor.plans) > 1)
    assert engine.stats["quiet_false"] == 0
    await engine.close()
