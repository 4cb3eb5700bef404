from __future__ import annotations

from local_copilot.prompt.budget import CUT_STEP, TokenEstimator
from local_copilot.prompt.context import build_context
from local_copilot.snapshot import Snapshot

from .window_reference import fit_context


def ctx_for(n_above: int, n_below: int, row0: int = 0, width: int = 40):
    lines = [f"line {i:05d} " + "x" * width for i in range(n_above + 1 + n_below)]
    lines[n_above] = "    cursor = here(1)"
    snap = Snapshot(buf=1, tick=1, row=row0 + n_above, col=len("    cursor = "), first=row0, lines=lines)
    return build_context(snap, lines_before=10_000, lines_after=10_000)


def test_small_context_is_untouched() -> None:
    ctx = ctx_for(5, 5)
    assert fit_context(ctx, 10_000, TokenEstimator(), first_row=0) is ctx


def test_fits_the_seeds_2048_token_slot_and_keeps_the_cursor_line() -> None:
    # -c 8192 --parallel 4 gives 2048 tokens per slot; 128 to generate, some for the template
    est = TokenEstimator()
    ctx = ctx_for(3000, 3000)
    budget = 2048 - 128 - 32
    out = fit_context(ctx, budget, est, first_row=0)
    prompt = out.prefix + out.middle + out.suffix
    assert est.tokens(prompt) + len(out.prev_lines) + len(out.next_lines) <= budget
    assert out.middle == "    cursor = " and out.line_suffix == "here(1)"
    assert out.prefix.endswith(ctx.prev_lines[-1] + "\n")  # nearest lines kept
    assert out.suffix.startswith("here(1)\n" + ctx.next_lines[0])
    # the prefix gets about three quarters of the room
    assert len(out.prev_lines) > 2 * len(out.next_lines)


def test_prefix_start_is_stable_while_typing_new_lines() -> None:
    est = TokenEstimator()
    starts = set()
    for extra in range(CUT_STEP - 1):
        # the user adds lines above the cursor one by one; the window slides with the cursor
        ctx = ctx_for(400 + extra, 50)
        out = fit_context(ctx, 1500, est, first_row=0)
        first_kept = len(ctx.prev_lines) - len(out.prev_lines)
        starts.add(first_kept)
        assert first_kept % CUT_STEP == 0
    assert len(starts) <= 2  # at most one step moved during CUT_STEP-1 new lines


def test_unused_suffix_room_goes_to_the_prefix() -> None:
    est = TokenEstimator()
    ctx = ctx_for(2000, 2)
    out = fit_context(ctx, 1000, est, first_row=0)
    assert len(out.next_lines) == 2
    assert est.tokens(out.prefix) > 0.8 * 1000 - 40


def test_estimator_learns_from_server_counts_but_stays_safe() -> None:
    est = TokenEstimator()
    for _ in range(20):
        est.observe(prompt_bytes=4000, prompt_tokens=1000)  # 4 bytes per token really
    assert 3.5 < est.bytes_per_token <= 4.0
    est.observe(prompt_bytes=1000, prompt_tokens=1000)  # CJK-heavy: 1 byte per token
    assert est.bytes_per_token < 3.0  # drops quickly toward the safe side


def test_estimate_holds_still_while_the_servers_ratio_barely_moves() -> None:
    # while typing, each answer reports a ratio a hair different from the last; the estimate
    # must not move with each (a new ratio means the window's cut is found anew)
    est = TokenEstimator()
    for _ in range(40):
        est.observe(prompt_bytes=3100, prompt_tokens=2710)
    settled = est.bytes_per_token
    assert 3100 / 2710 - 1 / TokenEstimator.STEPS <= settled <= 3100 / 2710  # rounded down: the safe side
    seen = set()
    for i in range(200):
        est.observe(prompt_bytes=3100 + i % 7, prompt_tokens=2710 + i % 3)
        seen.add(est.bytes_per_token)
    assert len(seen) <= 2
