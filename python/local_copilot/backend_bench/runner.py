"""The measurements, through the plugin's own backend classes (backends/*.py).

Two tests per backend, backends one after another (never at once: they would share the CPU):

* FIM latency: sequential requests for N tokens each; time to first token (client side, first
  non-empty text), end-to-end time, and tokens per second from the server's own token counts.
* Concurrency sweep: at each level c, c clients each send `rounds` requests back to back;
  generated and prompt tokens per second over the level's wall time, min/max time to first
  token, success rate, total time (the columns of the "LLM API Throughput Benchmark" the
  users ran).

Token counts come from the server (llama.cpp `timings.predicted_n` / `tokens_evaluated`,
OpenAI `usage`), so tokens/s means the same thing on every backend. Each request starts with a
line unique to this run, so no request is answered from another one's prompt cache.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import msgspec

from ..backend_config import BackendConfig
from ..backends import FimRequest, make_backend
from ..errors import LocalCopilotError
from ..stats import percentile
from ..transport.access import async_client

__all__ = [
    "Target",
    "Params",
    "Sample",
    "LatencyResult",
    "LevelResult",
    "BackendResult",
    "make_request",
    "bench_backend",
]

ProgressFn = Callable[[str], None]  # called once per finished request, with a phase label


class Target(msgspec.Struct, frozen=True):
    name: str
    cfg: BackendConfig


class Params(msgspec.Struct, frozen=True, kw_only=True):
    n_predict: int = 64
    requests: int = 5  # sequential requests of the latency test
    concurrency: list[int] = msgspec.field(default_factory=lambda: [1, 2, 4, 8, 16])
    rounds: int = 1  # requests per client at each concurrency level
    context_lines: int = 30  # lines before the cursor in each prompt
    warmup: int = 1
    ignore_eos: bool = True  # generate exactly n_predict tokens, as a throughput test must
    timeout_s: float = 120.0


class Sample(msgspec.Struct, kw_only=True):
    ok: bool
    ttft_ms: float = 0.0
    total_ms: float = 0.0
    gen_tokens: int = 0
    prompt_tokens: int = 0
    chars: int = 0
    tokens_from_server: bool = False  # False: counted from stream chunks
    server_tok_s: float | None = None  # llama.cpp timings.predicted_per_second
    error: str = ""


class LatencyResult(msgspec.Struct, kw_only=True):
    requests: int
    ok: int
    ttft_ms: dict[str, float]  # p50/min/max
    total_ms: dict[str, float]
    gen_tokens: float  # mean per request
    prompt_tokens: float
    decode_tok_s: float  # p50 of (tokens - 1) / (total - ttft): the streaming speed
    e2e_tok_s: float  # p50 of tokens / total
    server_tok_s: float | None = None
    errors: list[str] = []
    samples: list[Sample] = []


class LevelResult(msgspec.Struct, kw_only=True):
    concurrency: int
    requests: int
    ok: int
    success_rate: float
    gen_tokens: int
    prompt_tokens: int
    gen_tok_s: float
    prompt_tok_s: float
    ttft_min_ms: float
    ttft_max_ms: float
    total_s: float
    errors: list[str] = []


class BackendResult(msgspec.Struct, kw_only=True):
    name: str
    kind: str
    url: str
    model: str = ""
    error: str = ""  # the backend could not be measured at all
    latency: LatencyResult | None = None
    sweep: list[LevelResult] = []


# ------------------------------------------------------------------------------------ prompts

_BODY = [
    "def parse_header(line: str) -> tuple[str, str]:",
    '    key, _, value = line.partition(":")',
    "    return key.strip().lower(), value.strip()",
    "",
    "",
    "class Request:",
    "    def __init__(self, method: str, path: str, headers: dict[str, str]) -> None:",
    "        self.method = method",
    "        self.path = path",
    "        self.headers = headers",
    "",
    "    def header(self, name: str, default: str = '') -> str:",
    "        return self.headers.get(name.lower(), default)",
    "",
]


def make_request(i: int, params: Params, nonce: str) -> FimRequest:
    """Request `i`: a Python file of `context_lines` lines above the cursor, a few below."""
    before = [f"# bench {nonce} request {i}"]
    while len(before) < params.context_lines:
        before.extend(_BODY)
    before = before[: params.context_lines]
    return FimRequest(
        prefix="\n".join(before) + "\n\ndef content_length(req: Request) -> int:\n",
        middle="    value = ",
        suffix="\n    return int(value or 0)\n\n\ndef is_json(req: Request) -> bool:\n"
               "    return req.header('content-type').startswith('application/json')\n",
        n_predict=params.n_predict,
    )


# ------------------------------------------------------------------------------------ requests


def _force_length(backend: Any) -> None:
    """Ask for exactly n_predict tokens: no EOS, no stop strings (a throughput test must not end
    early). The backend class builds the body; this only adds to it."""
    original = backend.body

    def body(*args: Any, **kwargs: Any) -> dict[str, Any]:
        b: dict[str, Any] = original(*args, **kwargs)
        if "options" in b:  # Ollama has no ignore_eos; stop strings would end it early
            b["options"].pop("stop", None)
            return b
        b["ignore_eos"] = True
        b.pop("stop", None)
        b.pop("stop_token_ids", None)
        if "samplers" in b:  # llama.cpp's infill sampler ends a suggestion when unsure
            b["samplers"] = [s for s in b["samplers"] if s != "infill"]
        return b

    backend.body = body


async def one_request(backend: Any, req: FimRequest, timeout: float) -> Sample:
    started = time.perf_counter()
    first: float | None = None
    chars = chunks = 0
    gen = prompt = 0
    server = False
    server_rate: float | None = None
    stream = backend.complete(req)
    try:
        async with asyncio.timeout(timeout):
            async for chunk in stream:
                if chunk.text:
                    chunks += 1
                    chars += len(chunk.text)
                    if first is None:
                        first = time.perf_counter()
                if chunk.timings:
                    if chunk.timings.get("predicted_n"):
                        gen, server = int(chunk.timings["predicted_n"]), True
                    if chunk.timings.get("predicted_per_second"):
                        server_rate = float(chunk.timings["predicted_per_second"])
                    if not chunk.prompt_tokens and chunk.timings.get("prompt_n"):
                        prompt = int(chunk.timings["prompt_n"])
                if chunk.prompt_tokens:
                    prompt = int(chunk.prompt_tokens)
                if chunk.done:
                    break
    except TimeoutError:
        return Sample(ok=False, error=f"timed out after {timeout:.0f}s")
    except LocalCopilotError as exc:
        return Sample(ok=False, error=str(exc)[:300])
    except httpx.HTTPError as exc:
        return Sample(ok=False, error=f"{exc.__class__.__name__}: {exc}"[:300])
    finally:
        await stream.aclose()
    done = time.perf_counter()
    if not chunks and not gen:
        return Sample(ok=False, error="the server generated nothing")
    return Sample(ok=True, ttft_ms=((first or done) - started) * 1000, total_ms=(done - started) * 1000,
                  gen_tokens=gen or chunks, prompt_tokens=prompt, chars=chars, tokens_from_server=server,
                  server_tok_s=server_rate)


def _errors(samples: Sequence[Sample]) -> list[str]:
    return list(dict.fromkeys(s.error for s in samples if not s.ok))[:3]


def summarize_latency(samples: list[Sample]) -> LatencyResult:
    ok = [s for s in samples if s.ok]
    ttft = [s.ttft_ms for s in ok]
    total = [s.total_ms for s in ok]
    decode = [(s.gen_tokens - 1) / ((s.total_ms - s.ttft_ms) / 1000) for s in ok
              if s.gen_tokens > 1 and s.total_ms - s.ttft_ms > 0.01]
    e2e = [s.gen_tokens / (s.total_ms / 1000) for s in ok if s.total_ms > 0]
    server = [s.server_tok_s for s in ok if s.server_tok_s]

    def stat(v: list[float]) -> dict[str, float]:
        return {"p50": round(percentile(v, 50), 2), "min": round(min(v), 2) if v else 0.0,
                "max": round(max(v), 2) if v else 0.0}

    return LatencyResult(
        requests=len(samples), ok=len(ok), ttft_ms=stat(ttft), total_ms=stat(total),
        gen_tokens=round(sum(s.gen_tokens for s in ok) / len(ok), 1) if ok else 0.0,
        prompt_tokens=round(sum(s.prompt_tokens for s in ok) / len(ok), 1) if ok else 0.0,
        decode_tok_s=round(percentile(decode, 50), 1), e2e_tok_s=round(percentile(e2e, 50), 1),
        server_tok_s=round(percentile(server, 50), 1) if server else None,
        errors=_errors(samples), samples=samples)


def summarize_level(c: int, samples: list[Sample], wall_s: float) -> LevelResult:
    ok = [s for s in samples if s.ok]
    gen = sum(s.gen_tokens for s in ok)
    prompt = sum(s.prompt_tokens for s in ok)
    ttft = [s.ttft_ms for s in ok]
    return LevelResult(
        concurrency=c, requests=len(samples), ok=len(ok),
        success_rate=round(len(ok) / len(samples), 3) if samples else 0.0,
        gen_tokens=gen, prompt_tokens=prompt,
        gen_tok_s=round(gen / wall_s, 1) if wall_s > 0 else 0.0,
        prompt_tok_s=round(prompt / wall_s, 1) if wall_s > 0 else 0.0,
        ttft_min_ms=round(min(ttft), 1) if ttft else 0.0, ttft_max_ms=round(max(ttft), 1) if ttft else 0.0,
        total_s=round(wall_s, 3), errors=_errors(samples))


# ------------------------------------------------------------------------------------ one backend


def planned_requests(params: Params) -> int:
    """Requests one backend makes (for the progress bar)."""
    return params.warmup + params.requests + sum(c * params.rounds for c in params.concurrency)


async def _model_name(backend: Any) -> str:
    try:
        return str(await backend.served_model())
    except LocalCopilotError:
        return ""


async def bench_backend(target: Target, params: Params, *, progress: ProgressFn | None = None,
                        transport: httpx.AsyncBaseTransport | None = None) -> BackendResult:
    tick = progress or (lambda label: None)
    result = BackendResult(name=target.name, kind=target.cfg.kind, url=target.cfg.url)
    nonce = f"{random.getrandbits(32):08x}"
    counter = iter(range(10**9))
    limits = httpx.Limits(max_connections=max(params.concurrency, default=1) + 4,
                          max_keepalive_connections=max(params.concurrency, default=1) + 4)
    timeout = httpx.Timeout(params.timeout_s, connect=5.0)
    # the entry's trust and token, as the plugin's own requests (access.py)
    async with async_client([target.cfg], timeout=timeout, limits=limits, transport=transport, capped=False) as client:
        backend = make_backend(target.name, target.cfg, client)
        if params.ignore_eos:
            _force_length(backend)

        async def request(label: str) -> Sample:
            sample = await one_request(backend, make_request(next(counter), params, nonce), params.timeout_s)
            tick(label)
            return sample

        for _ in range(params.warmup):
            warm = await request(f"{target.name} warm-up")
            if not warm.ok:
                result.error = warm.error
                # the rest is skipped; keep the progress bar honest
                for _ in range(planned_requests(params) - params.warmup):
                    tick(f"{target.name} skipped")
                return result
        result.model = await _model_name(backend)
        samples = [await request(f"{target.name} latency") for _ in range(params.requests)]
        result.latency = summarize_latency(samples)
        for c in params.concurrency:
            label = f"{target.name} c={c}"

            async def client_loop() -> list[Sample]:
                return [await request(label) for _ in range(params.rounds)]  # noqa: B023

            t0 = time.perf_counter()
            per_client = await asyncio.gather(*(client_loop() for _ in range(c)))
            wall = time.perf_counter() - t0
            result.sweep.append(summarize_level(c, [s for group in per_client for s in group], wall))
    return result
