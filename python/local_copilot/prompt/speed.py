"""The server's measured speed, and the context it affords within the latency target.

What a user waits for at a new place is mostly the server's prompt evaluation: ~200 tokens/s
on a 2-core CPU for a 0.5B model, thousands on a GPU. The speeds come from the server's own
answers (llama.cpp `timings`: prompt_n/prompt_ms, predicted_n/predicted_ms; Ollama reports
the same), smoothed; a server that counts tokens but says no times (vLLM and other
OpenAI-compatible servers) is timed on the client's clock, its prompt speed read cautiously.
The local window is then sized so that evaluating it cold takes about `latency_target_ms`: all
of the budget on a GPU, less on a slow CPU, never less than MIN_CONTEXT_CHARS around the
cursor. The suffix the prompt carries is a small share of
that (prompt/window.py puts what changes last and short, see shape notes there).
"""

from __future__ import annotations

import math
from collections import deque

__all__ = ["ServerSpeed", "MIN_CONTEXT_CHARS", "Sizing"]

# the least context around the cursor, whatever the speed (minuet's advice for local models)
MIN_CONTEXT_CHARS = 512
# prompt evaluations shorter than this say more about the request's overhead than the speed
MIN_PROMPT_N = 24
# share of the sized window the suffix gets in the prompt: each move re-evaluates it
SUFFIX_SHARE = 0.12
MIN_SUFFIX_LINES = 4
WINDOW_STEP = 32  # tokens
CLIENT_READINGS = 8  # client-timed prompt speeds the slowest is taken of (observe_client)
# the prompt speed assumed until one is measured: a small model on a few CPU cores. The first
# request must arrive in time where the server is slow (a cold window there can outlast the
# request's timeout, and then nothing is measured); on a GPU it only makes the first window small
ASSUMED_PROMPT_TPS = 256.0


class Sizing:
    """What the measured speed allows: tokens for the local window (None: no limit from the
    speed, the server's context decides) and lines of suffix in the prompt."""

    __slots__ = ("window_tokens", "suffix_lines")

    def __init__(self, window_tokens: int | None, suffix_lines: int) -> None:
        self.window_tokens, self.suffix_lines = window_tokens, suffix_lines

    def __repr__(self) -> str:
        return f"Sizing(window_tokens={self.window_tokens}, suffix_lines={self.suffix_lines})"


class ServerSpeed:
    """Prompt-evaluation and generation speed of one server, in tokens per second."""

    def __init__(self) -> None:
        self.prompt_tps: float | None = None
        self.gen_tps: float | None = None
        self.samples = 0
        self._window: int | None = None  # the window last chosen (see sizing)
        self._bound = False  # prompt_tps is only a lower bound so far (see observe)
        self._client_rates: deque[float] = deque(maxlen=CLIENT_READINGS)  # (observe_client)

    @staticmethod
    def _blend(old: float | None, new: float) -> float:
        return new if old is None else 0.7 * old + 0.3 * new

    def observe(self, timings: dict[str, float]) -> None:
        """A finished answer's timings (llama.cpp names)."""
        pn, pms = timings.get("prompt_n"), timings.get("prompt_ms")
        if pn and pms and pn >= MIN_PROMPT_N and pms > 0:
            self.prompt_tps = self._blend(None if self._bound else self.prompt_tps, pn * 1000.0 / pms)
            self._bound = False
            self.samples += 1
        elif pn and pms and pms > 0 and (self.prompt_tps is None or self._bound):
            # a short evaluation's rate, overhead included, is a lower bound on the speed: a
            # prompt the server had cached (a restarted editor) says the server is at least this
            # fast, where the assumed CPU speed would size the window down until a long prompt
            # came by; the first real measurement replaces it
            bound = pn * 1000.0 / pms
            if bound > max(ASSUMED_PROMPT_TPS, self.prompt_tps or 0.0):
                self.prompt_tps, self._bound = bound, True
        gn, gms = timings.get("predicted_n"), timings.get("predicted_ms")
        if gn and gms and gn >= 2 and gms > 0:
            self.gen_tps = self._blend(self.gen_tps, gn * 1000.0 / gms)

    def observe_client(self, timings: dict[str, float]) -> None:
        """Timings read on the client's clock (a server that counts tokens but says no times):
        the prompt's time is the wait for the first token. A prompt the server had cached
        comes back as fast as a short one, so its rate would say the server is faster than a
        cold window allows: the prompt speed is the slowest of the last few such readings
        (one cold evaluation among them keeps the window honest)."""
        pn, pms = timings.get("prompt_n"), timings.get("prompt_ms")
        if pn and pms and pn >= MIN_PROMPT_N and pms > 0:
            self._client_rates.append(pn * 1000.0 / pms)
            self.prompt_tps = min(self._client_rates)
            self._bound = False
            self.samples += 1
        gn, gms = timings.get("predicted_n"), timings.get("predicted_ms")
        if gn and gms and gn >= 2 and gms > 0:
            # the first token's time is in the prompt's wait: n - 1 tokens since
            self.gen_tps = self._blend(self.gen_tps, (gn - 1) * 1000.0 / gms)

    def sizing(self, target_ms: int, bytes_per_token: float, lines_after: int) -> Sizing:
        """The window a cold evaluation of which takes about `target_ms` at the measured speed
        (first-token time of a short answer included: one generated token's time)."""
        prompt_tps = self.prompt_tps or ASSUMED_PROMPT_TPS
        gen_ms = 1000.0 / self.gen_tps if self.gen_tps else 0.0
        tokens = max(0.0, target_ms - gen_ms) * prompt_tps / 1000.0
        least = math.ceil(MIN_CONTEXT_CHARS / max(1.0, bytes_per_token))
        # in steps, and kept while the speed stays within a third of what chose it: a window
        # that changed with every measurement (a busy machine's speed swings from one answer
        # to the next) would move the prompt's start, and the server evaluates all after it
        window = max(least, int(tokens) // WINDOW_STEP * WINDOW_STEP)
        last = self._window
        if last is not None and last >= least and 0.75 * last <= window <= 1.33 * last:
            window = last
        self._window = window
        # a line of code is ~10 tokens: the suffix's share of the window, in lines
        suffix_lines = max(MIN_SUFFIX_LINES, int(window * SUFFIX_SHARE / 10))
        return Sizing(window, min(lines_after, suffix_lines))

    def describe(self) -> dict[str, float | None]:
        return {"prompt_tokens_per_s": None if self.prompt_tps is None else round(self.prompt_tps, 1),
                "generated_tokens_per_s": None if self.gen_tps is None else round(self.gen_tps, 1)}
