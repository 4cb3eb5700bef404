"""prompt/cache_key.py: the suggestion cache's key, from the lines near the cursor."""

from __future__ import annotations

from local_copilot.pipeline.cache import context_key
from local_copilot.prompt.context import build_context
from local_copilot.snapshot import Snapshot


def ctx(lines: list[str], row: int, col: int, first: int = 0):
    snap = Snapshot(buf=1, tick=1, row=row, col=col, first=first, lines=lines)
    return build_context(snap, lines_before=500, lines_after=500)


def test_cache_key_ignores_far_context_and_hits_after_window_slides() -> None:
    body = [f"l{i}" for i in range(100)]
    a = ctx(body + ["x = "] + ["tail"], row=100, col=4)
    b = ctx(body[5:] + ["x = "] + ["tail"], row=100, col=4, first=5)  # window slid
    assert context_key(a) == context_key(b)
    c = ctx(body + ["x = 1"] + ["tail"], row=100, col=5)
    assert context_key(a) != context_key(c)


def test_cache_key_names_the_file_and_counts_empty_lines() -> None:
    def at(path: str, lines: list[str], row: int) -> str:
        snap = Snapshot(buf=1, tick=1, row=row, col=0, first=0, lines=lines, path=path)
        return context_key(build_context(snap, lines_before=500, lines_after=500))

    # two empty files: the same text, different prompts (the path is in them)
    assert at("/p/a.py", [""], 0) != at("/p/b.lua", [""], 0)
    assert at("/p/a.py", [""], 0) == at("/p/a.py", [""], 0)
    # row 0 of a file vs row 1 under an empty first line; the same below the cursor
    assert at("/p/a.py", ["x"], 0) != at("/p/a.py", ["", "x"], 1)
    assert at("/p/a.py", ["x"], 0) != at("/p/a.py", ["x", ""], 0)
