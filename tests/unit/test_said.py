"""What an answer says of the server (pipeline/said.py), as the preparer keeps it: the speeds
the next windows are sized from, the bytes per token prompts are counted with, and a context
the server said is smaller than it seemed. And the whole way: an answer's counters, read by
the reader, reach the speeds `:LocalCopilot stats` shows (against a FAKE llama.cpp server)."""

from __future__ import annotations

from typing import Any

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.pipeline.complete import Ask
from local_copilot.pipeline.prepare import Preparer
from local_copilot.pipeline.said import Overflow, PromptSize, Speed
from local_copilot.prompt.request import FimRequest
from local_copilot.snapshot import Snapshot

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import llama, sse
from .test_engine import snap

TIMINGS = {"prompt_n": 400, "prompt_ms": 1000.0, "predicted_n": 11, "predicted_ms": 250.0}


def test_the_servers_own_counters_give_its_speeds() -> None:
    prompts = Preparer()
    prompts.learn(Speed(TIMINGS))
    assert prompts.speed.describe() == {"prompt_tokens_per_s": 400.0, "generated_tokens_per_s": 44.0}


def test_the_clients_clock_counts_the_first_token_in_the_prompts_wait() -> None:
    prompts = Preparer()
    prompts.learn(Speed(TIMINGS, client_timed=True))
    assert prompts.speed.describe() == {"prompt_tokens_per_s": 400.0, "generated_tokens_per_s": 40.0}


def test_a_prompts_size_as_the_server_counted_it_calibrates_the_estimate() -> None:
    prompts = Preparer()
    before = prompts.estimator.bytes_per_token
    req = FimRequest(prefix="x" * 3000, middle="", suffix="", n_predict=8)
    for _ in range(20):
        prompts.learn(PromptSize(req, 750))  # 4 bytes per token
    assert prompts.estimator.bytes_per_token > before


def test_a_refused_prompt_makes_the_next_ones_fit_the_context_the_server_said() -> None:
    lines = [f"value_{i} = compute({i}, other_{i})" for i in range(3000)]
    big = Snapshot(buf=1, tick=1, row=2999, col=len(lines[-1]), first=0, lines=lines, seq=1)
    cfg = load_config({"latency_target_ms": 100000})  # (the context bounds the window, not the speed)
    windows = []
    for told in (False, True):
        prompts = Preparer()
        prompts.learn(Speed(TIMINGS))
        if told:
            prompts.learn(Overflow(None, None, 1024))  # the server said its context is 1024 tokens
        prompts.prepare(big, cfg, 8192, [])
        windows.append(prompts.in_use["window_tokens"])
    assert windows[0] > 1024 >= windows[1]  # (it seemed to be 8192)


async def test_an_answers_counters_reach_the_speeds_the_stats_show(fake: Any) -> None:
    stream = [sse({"content": "ok", "stop": False}), sse({"content": "", "stop": True, "timings": TIMINGS})]
    server = fake(llama(stream))
    core = Core(RecordingEditor())
    core.configure(load_config({"backends": {"llama.cpp": {"url": server.url, "fim_template": "qwen"}},
                                "speculative": False}))
    out = await core.pipeline.complete(snap(1), Ask())
    assert out.text == "ok"
    sizing = core.sizing()
    assert sizing["prompt_tokens_per_s"] == 400.0 and sizing["generated_tokens_per_s"] == 44.0
    await core.close()
