"""The host's copy of the snapshot windows Lua sends (nvim/windows.py): a one-line snapshot
is applied to the last whole window of its buffer, a lost base is asked for, and the core gets
each buffer's snapshots oldest first."""

from __future__ import annotations

from local_copilot.nvim import protocol
from local_copilot.nvim.windows import Windows
from local_copilot.snapshot import Snapshot

WHOLE = {"buf": 1, "tick": 5, "row": 1, "col": 4, "first": 0, "nlines": 3, "seq": 1,
         "lines": ["def f():", "    x", "    return x"]}
LINE = {"buf": 1, "tick": 6, "row": 1, "col": 5, "first": 0, "nlines": 3, "seq": 2, "base": 1, "line": "    xy"}


def msg(raw: dict[str, object]) -> protocol.SnapshotMsg:
    decoded = protocol.decode("snapshot", raw)
    assert isinstance(decoded, protocol.SnapshotMsg)
    return decoded


def test_a_line_is_applied_to_the_whole_window_it_names() -> None:
    windows, resyncs = Windows(), []
    assert windows.read(msg(WHOLE), resyncs.append) is not None
    snap = windows.read(msg(LINE), resyncs.append)
    assert snap is not None and snap.lines == ["def f():", "    xy", "    return x"] and snap.seq == 2
    # the base stays the whole window: the next line applies to it, not to the line before
    snap = windows.read(msg({**LINE, "seq": 3, "line": "    xz"}), resyncs.append)
    assert snap is not None and snap.lines == ["def f():", "    xz", "    return x"]
    assert resyncs == [] and windows.buffers() == {1}


def test_a_base_the_host_never_had_is_asked_for_whole() -> None:
    windows, resyncs = Windows(), []
    windows.read(msg(WHOLE), resyncs.append)
    assert windows.read(msg({**LINE, "base": 9}), resyncs.append) is None
    assert resyncs == [1]


def test_an_older_snapshot_than_one_read_is_dropped_until_the_buffer_is_forgotten() -> None:
    windows, resyncs = Windows(), []
    windows.read(msg({**WHOLE, "seq": 4}), resyncs.append)
    assert windows.read(msg(WHOLE), resyncs.append) is None
    windows.forget(1)
    assert windows.buffers() == set()
    assert windows.read(msg(WHOLE), resyncs.append) is not None
    # a wiped buffer's window is gone: a line naming it asks for it whole
    windows.forget(1)
    assert windows.read(msg(LINE), resyncs.append) is None and resyncs == [1]


def test_the_core_gets_a_buffers_snapshots_oldest_first() -> None:
    windows = Windows()

    def snap(buf: int, seq: int) -> Snapshot:
        return Snapshot(buf=buf, tick=seq, row=0, col=0, first=0, lines=[""], seq=seq)

    assert windows.in_order(snap(1, 7))
    assert not windows.in_order(snap(1, 6))  # late, from the other channel
    assert windows.in_order(snap(1, 7)) and windows.in_order(snap(2, 1))  # per buffer
    windows.forget_order(1)
    assert windows.in_order(snap(1, 3))
