"""The prompt's shape keeps llama-server's cache as the cursor moves (prompt/window.py,
prompt/speed.py): the server keeps the common start of the cached prompt and evaluates
everything after the first new token again, so consecutive prompts for nearby places must
share a long start, and what differs must be short and last."""

from __future__ import annotations

import os

from local_copilot.config import load_config
from local_copilot.pipeline.prepare import Preparer
from local_copilot.prompt.speed import ASSUMED_PROMPT_TPS, MIN_CONTEXT_CHARS, ServerSpeed
from local_copilot.prompt.templates import get_template
from local_copilot.snapshot import Snapshot

QWEN = get_template("qwen")
SOURCE = [f"    value_{i} = compute(value_{i - 1}, {i})  # step {i}" if i % 10 else f"def step_{i}(value):"
          for i in range(600)]


def common_start(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def evaluated_again(cached: str, new: str, chunk: int = 64) -> str:
    """What llama-server evaluates of `new` with `cached` in its slot (§1.12, in characters):
    it keeps the common start, then shifts a run of the cached text further on that the new
    prompt continues with (lines dropped from the start cost nothing), and evaluates the rest."""
    head = common_start(cached, new)
    at = cached.find(new[head:head + chunk], head)
    if at < 0:
        return new[head:]
    return new[head + common_start(cached[at:], new[head:]):]


def prompt_at(prep: Preparer, lines: list[str], row: int, tps: float | None, target_ms: int = 1000) -> str:
    cfg = load_config({"latency_target_ms": target_ms})
    if tps is not None:
        prep.speed = ServerSpeed()
        prep.speed.observe({"prompt_n": 500, "prompt_ms": 500 * 1000 / tps, "predicted_n": 10, "predicted_ms": 100})
    first = max(0, row - 200)
    snap = Snapshot(buf=1, tick=row, row=row, col=4, first=first, lines=lines[first:row + 61], seq=row)
    p = prep.prepare(snap, cfg, 8192, QWEN.special_tokens)
    return QWEN.render(p.req.prefix, p.req.suffix, middle=p.req.middle)


def editing_down(rows: list[int]) -> list[str]:
    """Prompts at `rows` of a file where a line is opened (and typed) at each: the buffer grows."""
    prep = Preparer()
    lines = list(SOURCE)
    out = []
    for n, row in enumerate(rows):
        row += n  # the lines opened above push it down
        lines.insert(row, "    ")
        out.append(prompt_at(prep, lines, row, tps=200))
        lines[row] = "    x = 1"
    return out


def test_moving_down_a_few_lines_only_appends_to_the_cached_start() -> None:
    rows = [300, 301, 305, 306, 312, 313]
    prompts = editing_down(rows)
    for moved, before, after in zip([b - a for a, b in zip(rows, rows[1:])], prompts, prompts[1:]):
        new = evaluated_again(before, after)
        # what is evaluated again is the lines moved over, the typed line and the short suffix,
        # at the end; the rest of the window (above) stays cached
        suffix = after.split("<|fim_suffix|>")[1]
        assert new.count("\n") <= moved + 1 + suffix.count("\n"), new
        assert after.endswith(new) and "<|fim_prefix|>" not in new
        if moved == 1:  # the next line: most of the prompt is cached
            assert len(new) < 0.4 * len(after), new


def test_the_part_after_the_cursor_is_short_on_a_slow_server() -> None:
    prompt = editing_down([300])[0]
    suffix = prompt.split("<|fim_suffix|>")[1].split("<|fim_middle|>")[0]
    assert suffix.count("\n") <= 5  # a few lines: each move evaluates it again
    # and the prompt keeps at least ~512 characters around the cursor
    assert len(prompt) - len("<|fim_prefix|><|fim_suffix|><|fim_middle|>") >= MIN_CONTEXT_CHARS


def test_the_window_grows_with_the_measured_speed() -> None:
    slow = prompt_at(Preparer(), SOURCE, 400, tps=150)
    fast = prompt_at(Preparer(), SOURCE, 400, tps=20_000)
    assert len(fast) > 4 * len(slow)
    suffix = fast.split("<|fim_suffix|>")[1].split("<|fim_middle|>")[0]
    assert suffix.count("\n") == 60  # a fast server affords all the lines below that were sent


def test_sizing_from_speed() -> None:
    unknown = ServerSpeed().sizing(1000, 4.0, 60)
    assert unknown.window_tokens == int(ASSUMED_PROMPT_TPS)  # a CPU's speed until one is measured
    speed = ServerSpeed()
    speed.observe({"prompt_n": 10, "prompt_ms": 1000.0})  # too few tokens to tell a speed
    assert speed.prompt_tps is None
    speed.observe({"prompt_n": 400, "prompt_ms": 2000.0, "predicted_n": 20, "predicted_ms": 500.0})
    assert speed.prompt_tps == 200 and speed.gen_tps == 40
    sized = speed.sizing(1000, 4.0, 60)
    assert sized.window_tokens == int((1000 - 25) * 200 / 1000) // 32 * 32 and sized.suffix_lines == 4
    # never less than ~512 characters around the cursor
    assert ServerSpeed().sizing(10, 4.0, 60).window_tokens == MIN_CONTEXT_CHARS // 4


def test_a_cached_prompt_answered_fast_says_the_server_is_at_least_that_fast() -> None:
    # a short evaluation's rate is a lower bound: 3 tokens in 1 ms on a fast server lifts the
    # assumed CPU speed (a prompt the server had cached would otherwise size the window down)
    speed = ServerSpeed()
    speed.observe({"prompt_n": 3, "prompt_ms": 1.0})
    assert speed.prompt_tps == 3000 and speed.sizing(1000, 4.0, 60).window_tokens == 3000 // 32 * 32
    # one that is slower than the assumed speed says nothing
    slow = ServerSpeed()
    slow.observe({"prompt_n": 1, "prompt_ms": 25.0})
    assert slow.prompt_tps is None
    # the first real measurement replaces the bound rather than blending with it
    speed.observe({"prompt_n": 400, "prompt_ms": 2000.0})
    assert speed.prompt_tps == 200


def test_a_server_timed_by_the_client_is_taken_at_its_slowest_recent_prompt() -> None:
    """vLLM says how many tokens, not how long: the client's clock times the prompt (the wait
    for the first token). A cached prompt answers as fast as a short one, so the window is
    sized from the slowest of the recent readings, not from a cached prompt's rate."""
    speed = ServerSpeed()
    speed.observe_client({"prompt_n": 300, "prompt_ms": 1500, "predicted_n": 11, "predicted_ms": 500})
    cold = speed.sizing(1000, 4.0, 60).window_tokens
    assert speed.prompt_tps == 200 and speed.gen_tps == 20  # 10 tokens after the first in 0.5 s
    for _ in range(5):  # the same window again, cached: answered at once
        speed.observe_client({"prompt_n": 300, "prompt_ms": 40, "predicted_n": 11, "predicted_ms": 500})
    assert speed.prompt_tps == 200 and speed.sizing(1000, 4.0, 60).window_tokens == cold
    for _ in range(8):  # the cold reading has aged out: only fast ones are left
        speed.observe_client({"prompt_n": 300, "prompt_ms": 100, "predicted_n": 11, "predicted_ms": 500})
    assert speed.prompt_tps == 3000


def test_health_shows_the_measured_speeds_and_the_context_in_use() -> None:
    from local_copilot.health.report import latency_section

    prep = Preparer()
    prompt_at(prep, SOURCE, 400, tps=180)
    stats = {"backends": {}, "counters": {},
             "sizing": {**prep.speed.describe(), "context": prep.in_use, "latency_target_ms": 1000}}
    [item] = [i for i in latency_section(stats).items if "server speed" in i.message]
    assert "180 prompt tokens/s, 100 generated tokens/s" in item.message
    assert f"context in use: {prep.in_use['window_tokens']} tokens" in item.message
    assert "latency_target_ms 1000" in item.message


def test_a_new_speed_measurement_does_not_move_the_start_up() -> None:
    """Each answer's timings move the measured speed, and with it the window's budget; moving
    down a line right after (a warm-up, then `o`) must not put lines back at the start: the
    server would evaluate the whole window again."""
    moved_up = 0
    for row in range(300, 420):
        prep = Preparer()
        prep.estimator._set(4.0)
        before = prompt_at(prep, SOURCE, row, tps=150)
        after = prompt_at(prep, SOURCE, row + 1, tps=190)
        first = before.split("\n")[0][len("<|fim_prefix|>"):]
        moved_up += first not in after or after.index(first) > len("<|fim_prefix|>")
    assert moved_up == 0


def test_the_window_is_kept_while_the_speed_swings_a_little() -> None:
    speed = ServerSpeed()
    speed.observe({"prompt_n": 400, "prompt_ms": 2000.0})
    first = speed.sizing(1000, 4.0, 60).window_tokens
    speed.observe({"prompt_n": 400, "prompt_ms": 1600.0})  # 200 -> 215 tokens/s
    assert speed.sizing(1000, 4.0, 60).window_tokens == first
    for _ in range(5):
        speed.observe({"prompt_n": 400, "prompt_ms": 400.0})  # a GPU now: 1,000 tokens/s
    assert speed.sizing(1000, 4.0, 60).window_tokens > 3 * first


def window_chars(prompt: str) -> int:
    return len(prompt) - len("<|fim_prefix|><|fim_suffix|><|fim_middle|>")


def test_moving_up_keeps_the_least_context() -> None:
    """Moving up keeps the last prompt's start (its text stays cached) while the window above
    the cursor shrinks; never below ~512 characters: then the start moves up."""
    prep = Preparer()
    prep.estimator._set(3.2)
    for row in (400, 399, 396, 393, 390, 387, 384, 380, 376, 371, 350, 349, 345):
        prompt = prompt_at(prep, SOURCE, row, tps=150)
        assert window_chars(prompt) >= MIN_CONTEXT_CHARS, (row, window_chars(prompt))


def test_the_room_of_the_lines_below_left_out_goes_above() -> None:
    """On a slow server the prompt carries only a few lines below the cursor; the budget they
    would have had is spent on lines above, not left unused (the anchored start rounds it to
    whole steps, so within a tenth)."""
    for tps in (400, 800):
        for row in range(300, 420, 7):
            prep = Preparer()
            prep.estimator._set(4.0)
            prompt = prompt_at(prep, SOURCE, row, tps=tps)
            use = prep.in_use
            assert use["sized_tokens"] is not None and use["suffix_lines"] is not None and use["suffix_lines"] < 60
            assert use["window_tokens"] >= 0.9 * use["sized_tokens"], (tps, row, use)
            assert prompt.split("<|fim_suffix|>")[1].count("\n") <= use["suffix_lines"] + 1
