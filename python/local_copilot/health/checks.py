"""Pure judgements behind `:checkhealth local_copilot` and `local-copilot doctor`.

Each function takes facts that were already gathered (probe answers, versions, sizes) and
returns an `Item`: a level, one line for the user, and advice that says what to do. No I/O
here, so every verdict is unit-testable; probes.py gathers the facts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Literal
from urllib.parse import urlsplit

import msgspec

from ..prompt.budget import MIN_PROMPT_BUDGET, PROMPT_OVERHEAD

__all__ = [
    "Item",
    "Level",
    "LEVELS",
    "MIN_PROMPT_TOKENS",
    "FASTAPI_BROKEN",
    "INCLUDED_ROUTER_ERROR",
    "judge_fim_answer",
    "judge_context",
    "judge_prompt_room",
    "judge_url",
    "judge_api_key",
    "judge_fastapi",
    "judge_gcc",
    "nvcc_max_gcc",
    "parse_version",
    "version_at_least",
    "fastapi_pinned_below",
]

Level = Literal["ok", "info", "warn", "error"]
LEVELS: tuple[Level, ...] = ("ok", "info", "warn", "error")


class Item(msgspec.Struct, kw_only=True):
    level: Level
    message: str
    advice: list[str] = []


# below this many prompt tokens a suggestion sees only a few lines around the cursor
MIN_PROMPT_TOKENS = 512

# ------------------------------------------------------------------------------------ versions


def parse_version(text: str) -> tuple[int, ...]:
    """Leading numeric parts: '0.137.0rc1' -> (0, 137, 0); '' -> ()."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text or "")
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def version_at_least(version: str, minimum: str) -> bool:
    have, want = parse_version(version), parse_version(minimum)
    n = max(len(have), len(want))
    return have + (0,) * (n - len(have)) >= want + (0,) * (n - len(want))


# ------------------------------------------------------------------------------------ FIM probe

# how chat models open an answer; a FIM completion of code never starts like this
_CHAT_OPENERS = re.compile(
    r"^\s*(sure\b|here\b|here's|certainly|of course|absolutely|i'm\b|i am\b|i can\b|i'll\b|let me\b|"
    r"as an ai|to complete|the (code|function|completed|missing)\b)", re.I)
_CHAT_MARKERS = ("```", "<|im_start|>", "<|im_end|>", "[INST]", "<|assistant|>")


def judge_fim_answer(answer: str, suffix: str, *, elapsed_ms: float, ttft_ms: float, template_hint: str = "",
                     backend: str = "") -> Item:
    """Does a completion look like fill-in-the-middle? It must not repeat the text after the
    cursor (the template put the suffix where the model reads it as a prefix) nor read like a
    chat reply (an instruct model, or a prompt without FIM tokens)."""
    shown = answer if len(answer) <= 40 else answer[:37] + "..."
    timing = f"in {elapsed_ms:.0f} ms (first token {ttft_ms:.0f} ms)"
    fix_template = (f"set backends[{backend!r}].fim_template to the model's family; see :help local-copilot-config"
                    if backend else "set fim_template to the model's family")
    where = f"backends[{backend!r}]." if backend else ""
    base_model = ("use a base/coder model with FIM tokens (e.g. Qwen2.5-Coder-1.5B, not -Instruct), or set "
                  f"{where}prompt = 'chat' for an instruct model")
    if _CHAT_OPENERS.search(answer) or any(m in answer for m in _CHAT_MARKERS):
        return Item(level="error", message=f"FIM probe: the answer reads like a chat reply: {shown!r}",
                    advice=[base_model, fix_template])
    lines = [ln.strip() for ln in suffix.splitlines() if len(ln.strip()) >= 10]
    if any(ln in answer for ln in lines):
        return Item(level="error",
                    message=f"FIM probe: the answer repeats the text after the cursor: {shown!r}",
                    advice=[f"the FIM template does not match the model{template_hint}; {fix_template}", base_model])
    if not answer.strip():
        return Item(level="warn", message=f"FIM probe: the model answered nothing {timing}",
                    advice=["an empty answer to a simple function body suggests a model without FIM training; "
                            + base_model, "set log_level = 'debug' and look at :LocalCopilot log"])
    return Item(level="ok", message=f"FIM probe: {shown!r} {timing}")


# ------------------------------------------------------------------------------------ context


def judge_context(per_request: int, n_predict: int, *, more: Callable[[str, int, int], list[str]], slots: int = 1,
                  backend: str = "llama.cpp") -> Item:
    """Tokens one request may use (llama.cpp: the per-slot n_ctx, i.e. -c / --parallel) against
    what a completion needs: n_predict + the template's tokens + a useful prompt. `more`: the
    dialect's context_advice(backend, tokens needed, slots), how to give a request more."""
    hard = n_predict + PROMPT_OVERHEAD + MIN_PROMPT_BUDGET
    need = n_predict + PROMPT_OVERHEAD + MIN_PROMPT_TOKENS
    prompt = per_request - n_predict - PROMPT_OVERHEAD
    split = f" ({slots} slots x {per_request} tokens: llama-server splits -c over --parallel)" if slots > 1 else ""
    msg = f"context per request: {per_request} tokens{split}; n_predict={n_predict} leaves {max(prompt, 0)} for the prompt"
    if per_request >= need:
        return Item(level="ok", message=msg)
    advice = more(backend, need, slots)
    advice.append(f"or lower n_predict (now {n_predict})")
    if per_request < hard:
        return Item(level="error", message=msg + ": completions fail", advice=advice)
    return Item(level="warn", message=msg + f": fewer than {MIN_PROMPT_TOKENS}, so suggestions see only a few lines",
                advice=advice)


# a rough size of one line of code in tokens (~35 characters at ~3.5 characters per token)
TOKENS_PER_LINE = 10


def judge_prompt_room(per_request: int, n_predict: int, lines_before: int, lines_after: int) -> Item | None:
    """An info line when the configured context lines would not fit: prompts get trimmed
    (nearest lines kept), which is fine but worth knowing when suggestions miss far context."""
    room = per_request - n_predict - PROMPT_OVERHEAD
    wanted = (lines_before + lines_after + 1) * TOKENS_PER_LINE
    if room <= 0 or room >= wanted:
        return None
    return Item(level="info", message=f"prompts are trimmed to about {room // TOKENS_PER_LINE} lines around the cursor "
                                      f"(context asks for {lines_before} + {lines_after}, ~{wanted} tokens)")


# ------------------------------------------------------------------------------------ security

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def judge_url(backend: str, url: str) -> Item | None:
    """None for loopback or https; a warning when buffer text would cross the network in clear."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        return Item(level="error", message=f"backends[{backend!r}].url {url!r} is not an http(s) URL",
                    advice=[f"set backends[{backend!r}].url to e.g. http://127.0.0.1:8012"])
    if parts.scheme == "https" or host in _LOOPBACK or host.startswith("127."):
        return None
    return Item(level="warn",
                message=f"backends[{backend!r}].url {url} is another machine over plain http: your code and any "
                        "API key travel unencrypted",
                advice=[f"use https:// or an SSH tunnel (ssh -L PORT:127.0.0.1:PORT {host}) and point the url "
                        "at 127.0.0.1"])


def judge_api_key(backend: str, env_name: str, env: Mapping[str, str]) -> Item | None:
    """api_key_env names a variable; never look at (or print) its value beyond 'set or not'."""
    if not env_name:
        return None
    if env.get(env_name):
        return Item(level="ok", message=f"backends[{backend!r}].api_key_env: ${env_name} is set")
    return Item(level="warn", message=f"backends[{backend!r}].api_key_env names ${env_name}, which is not set in "
                                      "the environment of the Python host",
                advice=[f"export {env_name}=... in the shell that starts Neovim (the key is never read from config)",
                        f"or remove api_key_env from backends[{backend!r}] if the server needs no key"])


# ------------------------------------------------------------------------------------ vLLM pitfalls

FASTAPI_BROKEN = "0.137"
INCLUDED_ROUTER_ERROR = "'_IncludedRouter' object has no attribute 'path'"


def fastapi_pinned_below(requirements: Sequence[str], version: str = FASTAPI_BROKEN) -> bool:
    """Whether vLLM's own requirements keep fastapi below `version` ('fastapi[standard]<0.137.0,>=0.133')."""
    for req in requirements:
        name = re.match(r"\s*([A-Za-z0-9_.\-]+)", req)
        if not name or name.group(1).lower() != "fastapi":
            continue
        spec = req.split(";")[0]
        for op, bound in re.findall(r"(<=|<|==|~=)\s*([0-9][0-9a-zA-Z.]*)", spec):
            at_or_above = version_at_least(bound, version)
            below = not at_or_above
            same = at_or_above and version_at_least(version, bound)
            if (op == "<" and (below or same)) or (op in ("<=", "==", "~=") and below):
                return True
    return False


def judge_fastapi(python: str, vllm_version: str, fastapi_version: str, requirements: Sequence[str]) -> Item:
    """FastAPI 0.137 changed its router objects; a vLLM without the pin then fails every request
    with '_IncludedRouter' object has no attribute 'path' (its Prometheus middleware)."""
    if not fastapi_version:
        return Item(level="info", message=f"fastapi is not installed next to vLLM {vllm_version} ({python})")
    if not version_at_least(fastapi_version, FASTAPI_BROKEN):
        return Item(level="ok", message=f"fastapi {fastapi_version} (below {FASTAPI_BROKEN}, works with vLLM's metrics)")
    if fastapi_pinned_below(requirements):
        return Item(level="warn", message=f"fastapi {fastapi_version} is installed although vLLM {vllm_version} asks "
                                          f"for fastapi<{FASTAPI_BROKEN}",
                    advice=[f"{python} -m pip install 'fastapi<{FASTAPI_BROKEN}'"])
    return Item(level="error",
                message=f"fastapi {fastapi_version} with vLLM {vllm_version}, which lacks the fastapi<{FASTAPI_BROKEN} "
                        f"pin: every request fails with {INCLUDED_ROUTER_ERROR}",
                advice=[f"{python} -m pip install 'fastapi<{FASTAPI_BROKEN}'", "or upgrade vLLM to a release that pins it"])


# CUDA release -> newest GCC major its host_config.h accepts (used when that header is not found)
_NVCC_MAX_GCC: tuple[tuple[tuple[int, int], int], ...] = (
    ((13, 0), 15), ((12, 8), 14), ((12, 4), 13), ((12, 0), 12), ((11, 5), 11), ((11, 1), 10), ((11, 0), 9),
)


def nvcc_max_gcc(nvcc_version_output: str, host_config: str = "") -> tuple[str, int | None]:
    """(CUDA release, newest supported GCC major) from `nvcc --version` and, when found,
    the toolkit's crt/host_config.h, whose `#if __GNUC__ > N` is the check nvcc itself runs."""
    m = re.search(r"release (\d+)\.(\d+)", nvcc_version_output)
    release = f"{m.group(1)}.{m.group(2)}" if m else ""
    found = re.search(r"#if __GNUC__ > (\d+)", host_config)
    if found:
        return release, int(found.group(1))
    if not m:
        return release, None
    rel = (int(m.group(1)), int(m.group(2)))
    for since, gcc in _NVCC_MAX_GCC:
        if rel >= since:
            return release, gcc
    return release, None


def judge_gcc(gcc_version: str, cuda_release: str, max_gcc: int | None, env: Mapping[str, str]) -> Item | None:
    """FlashInfer compiles kernels with nvcc at vLLM's first start; nvcc refuses a GCC newer than
    its toolkit supports unless told to allow it."""
    major = parse_version(gcc_version)[:1]
    if not major or max_gcc is None:
        return None
    if major[0] <= max_gcc:
        return Item(level="ok", message=f"gcc {gcc_version} is supported by CUDA {cuda_release} (up to gcc {max_gcc})")
    if "-allow-unsupported-compiler" in env.get("FLASHINFER_EXTRA_CUDAFLAGS", ""):
        return Item(level="ok", message=f"gcc {gcc_version} is newer than CUDA {cuda_release} supports (gcc {max_gcc}); "
                                        "FLASHINFER_EXTRA_CUDAFLAGS allows it")
    return Item(level="warn",
                message=f"gcc {gcc_version} is newer than CUDA {cuda_release} supports (up to gcc {max_gcc}): "
                        "FlashInfer's kernel compile in vLLM fails",
                advice=["export FLASHINFER_EXTRA_CUDAFLAGS=-allow-unsupported-compiler before starting vLLM",
                        "or, when local-copilot starts it: backends.vllm.server = { env = { "
                        "FLASHINFER_EXTRA_CUDAFLAGS = '-allow-unsupported-compiler' } }",
                        f"or install gcc {max_gcc} and point CC/CXX at it"])
