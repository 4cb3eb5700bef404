"""The edit history: splices merged into edits, bounds, and the privacy policy."""

from __future__ import annotations

from typing import Any

import httpx

from local_copilot.config import load_config
from local_copilot.next_edit.history import History, unified_hunk
from local_copilot.next_edit.request import NextEdits
from local_copilot.privacy.gate import Gate
from local_copilot.stats import Stats


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_typing_a_word_is_one_edit() -> None:
    h = History(clock=Clock())
    h.record("a.py", 3, ["x = 1"], ["x = 12"])
    h.record("a.py", 3, ["x = 12"], ["x = 123"])
    (e,) = h.events()
    assert (e.row, e.old, e.new) == (3, ("x = 1",), ("x = 123",))


def test_a_line_opened_inside_an_edit_folds_into_it() -> None:
    h = History(clock=Clock())
    h.record("a.py", 0, ["a", "b"], ["a", "bb"])
    h.record("a.py", 1, ["bb"], ["bb", "c"])
    (e,) = h.events()
    assert (e.row, e.old, e.new) == (0, ("a", "b"), ("a", "bb", "c"))


def test_an_edit_undone_is_dropped_and_other_files_stay_apart() -> None:
    h = History(clock=Clock())
    h.record("a.py", 0, ["x"], ["y"])
    h.record("b.py", 0, ["x"], ["y"])
    h.record("b.py", 0, ["y"], ["x"])
    assert [e.path for e in h.events()] == ["a.py"]


def test_bounded_by_count_bytes_and_age() -> None:
    clock = Clock()
    h = History(max_events=3, max_bytes=100, max_age_s=60, clock=clock)
    for i in range(5):
        h.record("a.py", i * 10, [f"old{i}"], [f"new{i}"])
    assert [e.new for e in h.events()] == [("new2",), ("new3",), ("new4",)]
    h.record("a.py", 100, ["o" * 40], ["n" * 40])  # 82 bytes: the oldest go until 100 fit
    assert [e.row for e in h.events()] == [40, 100]
    h.record("a.py", 200, ["o" * 200], ["n"])  # bigger than the whole budget: not kept
    assert [e.row for e in h.events()] == [40, 100]
    clock.t = 61
    assert h.events() == []


def test_context_rows_frame_the_diff_and_stay_when_an_edit_grows() -> None:
    h = History(clock=Clock())
    h.record("a.py", 10, ["x = 1"], ["x = 12"], before=["a", "b"], after=["c"])
    h.record("a.py", 10, ["x = 12"], ["x = 123"], before=["a", "b"], after=["c"])
    (e,) = h.events()
    assert (e.original, e.updated) == (["a", "b", "x = 1", "c"], ["a", "b", "x = 123", "c"])
    assert unified_hunk(e) == "@@ -9,4 +9,4 @@\n a\n b\n-x = 1\n+x = 123\n c"


def test_unified_hunk_numbers_rows_of_the_file() -> None:
    h = History(clock=Clock())
    h.record("a.py", 9, ["def f(a):", "    return a"], ["def f(b):", "    return a"])
    assert unified_hunk(h.events()[0]) == "@@ -10,2 +10,2 @@\n-def f(a):\n+def f(b):\n     return a"


class _Editor:
    def update(self, u: Any) -> None: ...


class _Ring:
    def use_policy(self, policy: Any) -> None: ...

    def drop(self, path: str) -> None: ...


def test_privacy_policy_keeps_secrets_out_of_the_history() -> None:
    editor = _Editor()
    ne = NextEdits(editor, Stats(), Gate(editor, _Ring()), lambda buf: None)  # type: ignore[arg-type,return-value]
    ne.record("/home/u/proj/.env", 0, ["A=1"], ["A=2"])
    ne.record("/home/u/.ssh/config", 0, ["Host a"], ["Host b"])
    ne.record("/home/u/proj/app.py", 0, ["x = 1"], ["x = 2"])
    assert [e.path for e in ne.history.events()] == ["/home/u/proj/app.py"]
    # a change that holds a key block is not kept, and drops the file's earlier edits
    ne.record("/home/u/proj/app.py", 5, [""], ["-----BEGIN OPENSSH PRIVATE KEY-----"])
    assert ne.history.events() == []
    # nor one whose context rows hold one
    ne.record("/home/u/proj/app.py", 9, ["x = 1"], ["x = 2"], before=["-----BEGIN OPENSSH PRIVATE KEY-----"])
    assert ne.history.events() == []


async def test_turning_next_edits_off_forgets_the_history() -> None:
    editor = _Editor()
    ne = NextEdits(editor, Stats(), Gate(editor, _Ring()), lambda buf: None)  # type: ignore[arg-type,return-value]
    async with httpx.AsyncClient() as client:
        ne.configure(load_config({"next_edit": {"enabled": True}}), None, client)
        ne.record("/home/u/proj/app.py", 0, ["x = 1"], ["x = 2"])
        ne.configure(load_config({"next_edit": {"enabled": True, "debounce_ms": 50}}), None, client)
        assert [e.path for e in ne.history.events()] == ["/home/u/proj/app.py"]  # new options keep it
        ne.configure(load_config({"next_edit": {"enabled": False}}), None, client)
    assert ne.history.events() == []
