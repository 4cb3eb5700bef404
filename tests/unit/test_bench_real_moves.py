"""`make bench-real`'s plan of moves: every kind of move comes, and the move back to the other
buffer returns to the row last typed at there (the case llama-server's defaults empty a slot for)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import real  # noqa: E402

SIZES = {0: 2600, 1: 480}  # argparse.py's and textwrap.py's lines, roughly


def test_every_kind_of_move_comes_in_a_plan_of_a_dozen_bursts() -> None:
    plan = real.moves(13, seed=0, sizes=SIZES)
    kinds = {kind for kind, _, _ in plan}
    assert kinds == {"next line", "a few lines down", "another function", "back to an earlier place",
                     "another buffer", real.RETURN}


def test_back_in_the_other_buffer_is_the_row_last_typed_at_there() -> None:
    plan = real.moves(40, seed=3, sizes=SIZES)
    returns = 0
    for i, (kind, buf, row) in enumerate(plan):
        if kind != real.RETURN:
            continue
        before = plan[i - 1]
        assert buf != before[1]  # the other buffer than the last burst's
        last_there = [r for _, b, r in plan[:i] if b == buf]
        assert last_there and row == last_there[-1]
        returns += 1
    assert returns >= 5
    # every row stays inside its file
    assert all(20 <= row <= SIZES[buf] - 20 for _, buf, row in plan)
