"""The health report: one source for `:checkhealth local_copilot` and `local-copilot doctor`.

`collect()` returns a `Report` (sections of items, each OK/INFO/WARN/ERROR with advice); the
Neovim host hands it to Lua as plain data (health.lua only renders it) and the CLI prints it
with `render_text()`. Verdicts live in checks.py, fact gathering in probes.py;
this module decides what to look at and in which order, and bounds the time it takes.

API keys are never printed: only whether the variable `api_key_env` names is set.
"""

from __future__ import annotations

import asyncio
import copy
import os
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec

from ..backends import FimRequest, make_backend, registry
from ..transport.access import async_client, auth_headers, tls_failure, token_refused
from ..config import BackendConfig, Config, load_config
from ..errors import BackendError, ConfigError, LocalCopilotError, TokenRefused
from ..prompt.templates import detect_family
from ..servers.options import ServerOptions, server_options
from . import checks as hc
from . import probes as hp
from .styles import probe_shown, style_item
from .checks import Item, Level
from .edits import edit_items
from .kinds import kind_items
from .tls import judge_tls_verify, tls_items

__all__ = ["Item", "Section", "Report", "collect", "collect_sync", "render_text", "PROBE", "REQUIRED_PACKAGES"]

# (distribution, minimum) the Python host needs; the same floors as pyproject.toml
REQUIRED_PACKAGES = (("pynvim", "0.5"), ("httpx", "0.27"), ("msgspec", "0.18"), ("platformdirs", "4"))
MIN_PYTHON = (3, 11)

# the FIM probe: a function body whose middle is obvious; the suffix has long lines to spot echoes
PROBE = FimRequest(
    prefix='def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n',
    middle="        return ",
    suffix="\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n\nprint(fibonacci(10))\n",
    n_predict=16,
    t_max_predict_ms=2000,
)

LOG_WARN_BYTES = 50 * 1024 * 1024
SLOW_TTFT_MS = 1000.0


class Section(msgspec.Struct, kw_only=True):
    name: str
    items: list[Item] = []

    def add(self, level: Level, message: str, *advice: str) -> Item:
        item = Item(level=level, message=message, advice=[a for a in advice if a])
        self.items.append(item)
        return item


class Report(msgspec.Struct, kw_only=True):
    sections: list[Section] = []

    def worst(self) -> Level:
        order = {lvl: i for i, lvl in enumerate(hc.LEVELS)}
        levels = [it.level for s in self.sections for it in s.items]
        return max(levels, key=lambda lvl: order[lvl]) if levels else "ok"

    @property
    def broken(self) -> bool:
        return any(it.level == "error" for s in self.sections for it in s.items)


# ------------------------------------------------------------------------------------ sections


def python_section(name: str = "python3 host") -> Section:
    sec = Section(name=name)
    v = sys.version_info
    where = f"{v.major}.{v.minor}.{v.micro} at {sys.executable}"
    if (v.major, v.minor) < MIN_PYTHON:
        sec.add("error", f"python {where}: local-copilot needs {'.'.join(map(str, MIN_PYTHON))} or newer",
                "point g:python3_host_prog at a newer python (e.g. the plugin's .venv: require('local_copilot.install').build())")
    else:
        sec.add("ok", f"python {where}")
    missing = []
    for dist, minimum in REQUIRED_PACKAGES:
        version = hp.package_version(dist)
        if not version:
            missing.append(dist)
            sec.add("error", f"{dist} is not installed in this python",
                    f"{sys.executable} -m pip install {' '.join(d for d, _ in REQUIRED_PACKAGES)}")
        elif not hc.version_at_least(version, minimum):
            sec.add("warn", f"{dist} {version} is older than {minimum}",
                    f"{sys.executable} -m pip install -U '{dist}>={minimum}'")
        else:
            sec.add("ok", f"{dist} {version}")
    return sec


def neovim_section(env: Mapping[str, str]) -> Section:
    """For the terminal only: in Neovim, health.lua checks these itself."""
    sec = Section(name="neovim")
    exe, version = hp.nvim_version()
    if not exe:
        sec.add("warn", "nvim is not on PATH", "install Neovim 0.11 or newer (https://neovim.io)")
    elif not hc.version_at_least(version, "0.11"):
        sec.add("error", f"nvim {version or '(unknown version)'} at {exe}: needs 0.11 or newer (inline virtual text)",
                "upgrade Neovim to 0.11 or newer")
    else:
        sec.add("ok", f"nvim {version} at {exe}")
    manifest = hp.rplugin_manifest(env)
    try:
        registered = "LocalCopilotEvent" in manifest.read_text(errors="replace")
    except OSError:
        registered = False
    if registered:
        sec.add("ok", f"remote plugin registered in {manifest}")
    else:
        sec.add("warn", f"the remote plugin is not registered in {manifest}",
                "run :UpdateRemotePlugins in Neovim, then restart it")
    return sec


def _field_path(message: str) -> str:
    start = message.find("`$")
    end = message.find("`", start + 1)
    return message[start + 1:end] if start >= 0 and end > start else ""


def load_options(raw: Any, backend: str | None = None
                 ) -> tuple[Config | None, dict[str, ServerOptions], str | None]:
    """(config, server options per backend, error). `server` tables are read apart from
    BackendConfig, as the CLI does. On a bad option outside `backends`, the backends are still
    loaded (without the bad parts) so their checks can run."""
    raw = copy.deepcopy(raw) if isinstance(raw, dict) else ({} if raw in (None, []) else raw)
    if not isinstance(raw, dict):
        return None, {}, f"options must be a table, got {type(raw).__name__}"
    backends_raw = raw.get("backends") or {}
    servers: dict[str, Any] = {}
    if isinstance(backends_raw, dict):
        for key, value in backends_raw.items():
            if isinstance(value, dict) and "server" in value:
                servers[key] = value.pop("server")
    if backend:
        raw["backend"] = backend
    error: str | None = None
    try:
        cfg: Config | None = load_config(raw)
    except ConfigError as exc:
        error = str(exc)
        cfg = None
        # keep going with what is valid: the backends and the choice of one
        partial = {k: raw[k] for k in ("backend", "backends") if k in raw}
        for attempt in (partial, {"backends": raw.get("backends")}):
            try:
                cfg = load_config(attempt)
                break
            except ConfigError:
                continue
    options: dict[str, ServerOptions] = {}
    if cfg is not None:
        for key, bcfg in cfg.backends.items():
            try:
                options[key] = server_options(bcfg, servers.get(key))
            except ConfigError as exc:
                error = error or str(exc).replace("`$.server", f"`$.backends.{key}.server")
                options[key] = ServerOptions()
    return cfg, options, error


def config_section(cfg: Config | None, error: str | None, env: Mapping[str, str]) -> Section:
    sec = Section(name="configuration")
    if error:
        path = _field_path(error)
        where = f"the option at `{path}`" if path else "the options"
        sec.add("error", f"bad option: {error}",
                f"fix {where} in require('local_copilot').setup({{...}}); see :help local-copilot-config",
                "completions stay off until the options are valid")
    if cfg is None:
        if not error:
            sec.add("error", "no configuration loaded", "call require('local_copilot').setup({})")
        return sec
    if not error:
        sec.add("ok", f"options valid; active backend {cfg.backend!r} at {cfg.active.url}")
    for name, bcfg in cfg.backends.items():
        for item in (hc.judge_url(name, bcfg.url), hc.judge_api_key(name, bcfg.api_key_env, env),
                     judge_tls_verify(name, bcfg)):
            if item is not None:
                sec.items.append(item)
    return sec


def latency_section(stats: Mapping[str, Any]) -> Section:
    sec = Section(name="recent completions")
    backends = stats.get("backends") or {}
    counters = stats.get("counters") or {}
    if not any((b or {}).get("n") for b in backends.values()):
        sec.add("info", "no completions yet in this session (type in Insert mode, then run this again)")
    for name, b in backends.items():
        if not b or not b.get("n"):
            continue
        ttft, total = b.get("ttft_ms") or {}, b.get("total_ms") or {}

        def pick(d: Mapping[Any, Any], p: int) -> float:
            return float(d.get(f"p{p}", d.get(p, 0)))  # "p50" (int keys in older summaries)

        def pcts(d: Mapping[Any, Any]) -> str:
            return "/".join(f"{pick(d, p):.0f}" for p in (50, 95, 99))

        msg = (f"{name}: {b['n']} completions; first token p50/p95/p99 {pcts(ttft)} ms, "
               f"total {pcts(total)} ms, {b.get('chars_per_s', 0):.0f} chars/s")
        p50 = pick(ttft, 50)
        if p50 > SLOW_TTFT_MS:
            sec.add("warn", msg + ": slow to start",
                    "a smaller model, a GPU build of the server, or fewer context lines (context.lines_before)")
        else:
            sec.add("ok", msg)
    sizing = stats.get("sizing") or {}
    if sizing.get("prompt_tokens_per_s"):
        ctx = sizing.get("context") or {}
        gen = sizing.get("generated_tokens_per_s")
        sec.add("info", f"server speed measured: {sizing['prompt_tokens_per_s']:.0f} prompt tokens/s, "
                        + (f"{gen:.0f} generated tokens/s" if gen else "generation not measured yet")
                        + f"; context in use: {ctx.get('window_tokens', '?')} tokens (~{ctx.get('chars', '?')} characters,"
                        f" {ctx.get('lines_before', '?')} lines above, up to {ctx.get('suffix_lines', '?')} below),"
                        f" sized for latency_target_ms {sizing.get('latency_target_ms')}",
                "a faster server (a GPU) gets more context; latency_target_ms trades context for speed")
    errors = int(counters.get("errors", 0))
    # every request an error can come from: a suggestion's first (a failed probe counts as
    # one: reading.py), the continuations after a pause, the speculative ones
    requests = sum(int(counters.get(k, 0)) for k in ("requests", "continuations", "speculative"))
    if errors:
        sec.add("warn", f"{errors} of {requests} requests failed since the host started",
                ":LocalCopilot log shows each error; the backend sections above say whether it is up now")
    elif requests:
        sec.add("ok", f"{requests} requests, no errors")
    return sec


def log_section(path: Path, level: str) -> Section:
    sec = Section(name="log")
    try:
        size = path.stat().st_size
    except OSError:
        sec.add("info", f"log file {path} (not written yet); level {level}")
        return sec
    human = f"{size / 1024 / 1024:.1f} MB" if size >= 1024 * 1024 else f"{size / 1024:.1f} KB"
    if size > LOG_WARN_BYTES:
        sec.add("warn", f"log file {path} is {human}", f"delete it; log_level = {level!r}: use 'warn' unless debugging")
    else:
        sec.add("info", f"log file {path} ({human}); level {level}")
    if level == "debug":
        sec.add("warn", "log_level = 'debug' writes buffer text and completions to the log",
                "set log_level = 'warn' when you are done debugging")
    return sec


# ------------------------------------------------------------------------------------ backends


def _is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def _port(url: str) -> int:
    parts = urlsplit(url)
    try:
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return 0


def _start_advice(name: str, bcfg: BackendConfig, kind: str | None, opts: ServerOptions) -> list[str]:
    if not _is_loopback(bcfg.url):
        return [f"check that the server at {bcfg.url} runs and this machine can reach it"]
    port = _port(bcfg.url)
    advice = [f"start it: `local-copilot start {name}` in a terminal, or :LocalCopilotBackend {name}"]
    model = opts.weights or bcfg.model
    if bcfg.cmd:
        advice.append(f"or run backends[{name!r}].cmd yourself: {' '.join(bcfg.cmd)}")
    elif kind == "llama.cpp":
        what = f"-m {model}" if model else "--fim-qwen-1.5b-default"
        advice.append(f"or run it yourself: llama-server {what} --port {port}")
    elif kind == "vllm":
        advice.append(f"or run it yourself: vllm serve {model or 'MODEL'} --port {port}")
    elif kind == "ollama":
        advice.append(f"or run it yourself: OLLAMA_HOST=127.0.0.1:{port} ollama serve")
    elif kind == "sglang":
        advice.append(f"or run it yourself: python -m sglang.launch_server --model-path {model or 'MODEL'} --port {port}")
    elif kind == "lmstudio":
        advice.append(f"or run it yourself: lms server start --port {port}")
    advice.append(f"or point backends[{name!r}].url at where your server listens")
    return advice


class _Ctx(msgspec.Struct, kw_only=True):
    """What one backend check needs besides the backend itself."""

    cfg: Config
    env: dict[str, str]
    client: Any  # httpx.AsyncClient
    probe_timeout: float


async def _thread(fn: Any, *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


async def _reachable(name: str, bcfg: BackendConfig, client: httpx.AsyncClient, timeout: float
                     ) -> tuple[Level, str, int]:
    """(level, message, HTTP status, 0 when nothing answered, -1 when TLS failed) for the
    server's cheap endpoint."""
    path = registry.get(bcfg.kind).ready_path
    url = bcfg.url.rstrip("/") + path
    try:
        resp = await client.get(url, headers=auth_headers(bcfg), timeout=httpx.Timeout(timeout, connect=timeout))
    except httpx.ConnectError as exc:
        tls = tls_failure(name, bcfg, exc)
        if tls is not None:
            return "error", str(tls).removeprefix(f"{name}: "), -1
        return "error", f"cannot reach {bcfg.url} ({_why(exc)})", 0
    except httpx.TimeoutException:
        return "error", f"no answer from {bcfg.url} within {timeout:.1f}s", 0
    except httpx.HTTPError as exc:
        return "error", f"cannot reach {bcfg.url} ({exc.__class__.__name__}: {exc})", 0
    if resp.status_code == 200:
        return "ok", f"reachable at {bcfg.url} ({path} answered in {resp.elapsed.total_seconds() * 1000:.0f} ms)", 200
    if resp.status_code == 503:
        return "warn", f"{bcfg.url} is up but not ready (503: loading the model)", 503
    if resp.status_code in (401, 403):
        said = str(token_refused(name, bcfg, resp.status_code, resp.text[:120].strip()))
        return "error", f"{bcfg.url}{path}: " + said.removeprefix(f"{name}: "), resp.status_code
    return "error", f"{bcfg.url}{path} answered HTTP {resp.status_code}: {resp.text[:160].strip()}", resp.status_code


def _why(exc: Exception) -> str:
    text = str(exc)
    low = text.lower()
    if "refused" in low or "errno 111" in low or "all connection attempts failed" in low:
        return "connection refused: nothing listens there"
    return text or exc.__class__.__name__


def _which(exe: str, env: Mapping[str, str]) -> str | None:
    if os.sep in exe:
        return exe if os.access(exe, os.X_OK) else None
    return shutil.which(exe, path=env.get("PATH"))


async def _binary_items(name: str, bcfg: BackendConfig, kind: str | None, opts: ServerOptions,
                        env: Mapping[str, str], up: bool) -> list[Item]:
    """Items about the server program on this machine (binary, version, vLLM's packages)."""
    from ..servers import recipes

    items: list[Item] = []
    missing: Level = "info" if up else "error"
    missing_note = " (a server answers anyway)" if up else ""
    if bcfg.cmd:
        exe = _which(bcfg.cmd[0], env)
        if exe:
            items.append(Item(level="ok", message=f"launch command: {' '.join(bcfg.cmd)[:160]}"))
        else:
            items.append(Item(level=missing, message=f"backends[{name!r}].cmd: {bcfg.cmd[0]} not found{missing_note}",
                              advice=[f"install it or fix backends[{name!r}].cmd"]))
        return items
    if kind == "llama.cpp":
        from ..servers.llama_cpp import find_llama_server

        exe = await _thread(find_llama_server)
        if not exe:
            items.append(Item(level=missing, message=f"llama-server not found{missing_note}",
                              advice=[recipes.INSTALL_HINTS["llama.cpp"]]))
            return items
        version = await _thread(hp.binary_version, [exe, "--version"])
        items.append(Item(level="ok", message=f"llama-server {version or '(version unknown)'} at {exe}"))
        return items
    if kind == "vllm":
        try:
            launcher = await _thread(recipes.find_vllm, opts.python, env)
        except LocalCopilotError as exc:
            items.append(Item(level=missing, message=f"{exc}{missing_note}", advice=[recipes.INSTALL_HINTS["vllm"]]))
            return items
        if launcher is None:
            items.append(Item(level=missing, message=f"vLLM not found{missing_note}",
                              advice=[recipes.INSTALL_HINTS["vllm"]]))
            return items
        python = launcher.exe if not launcher.console else (recipes._shebang_python(launcher.exe) or "")
        if not python:
            items.append(Item(level="ok", message=f"vLLM at {launcher.exe}"))
            return items
        pk = await _thread(hp.vllm_packages, python)
        if pk.error or not pk.vllm:
            items.append(Item(level="warn", message=f"cannot read vLLM's version from {python}: {pk.error or 'not found'}",
                              advice=[recipes.INSTALL_HINTS["vllm"]]))
            return items
        items.append(Item(level="ok", message=f"{pk.dist} {pk.vllm} in {python}"))
        items.append(hc.judge_fastapi(python, pk.vllm, pk.fastapi, pk.requires))
        return items
    if kind == "ollama":
        exe = _which("ollama", env)
        if not exe:
            items.append(Item(level=missing, message=f"ollama not found{missing_note}",
                              advice=[recipes.INSTALL_HINTS["ollama"]]))
            return items
        version = await _thread(hp.binary_version, [exe, "--version"])
        items.append(Item(level="ok", message=f"ollama {version or ''} at {exe}".replace("  ", " ")))
    return items


def _gcc_item(env: Mapping[str, str]) -> Item | None:
    facts = hp.nvcc_facts(env)
    if facts is None:
        return None
    release, max_gcc = hc.nvcc_max_gcc(*facts)
    return hc.judge_gcc(hp.gcc_version(env), release, max_gcc, env)


def _gpu_items(name: str, kind: str | None, opts: ServerOptions, bcfg: BackendConfig, env: Mapping[str, str],
               *, running: bool, model_hint: str) -> list[Item]:
    from ..servers import memory

    gpus = memory.query_gpus(timeout=5.0)
    if gpus is None:
        what = "llama.cpp runs on the CPU" if kind == "llama.cpp" else (
            "vLLM needs a GPU unless it is a CPU build" if kind == "vllm" else "the server runs on the CPU")
        return [Item(level="info", message=f"no NVIDIA GPU found (nvidia-smi missing or failing): {what}")]
    gpu = memory.pick_gpu(gpus, env)
    if gpu is None:
        return [Item(level="info", message="CUDA_VISIBLE_DEVICES hides the GPUs: the server runs on the CPU")]
    state = (f"GPU {gpu.index}: {memory.fmt_gib(gpu.free)} free of {memory.fmt_gib(gpu.total)}"
             + (" (the running server's share is already taken)" if running else ""))
    model = opts.weights or bcfg.model or model_hint
    if kind == "vllm":
        model_dir = memory.find_model_dir(model, env) if model else None
        if model_dir is None:
            return [Item(level="info", message=f"{state}; the model {model or '(none configured)'} is not on this "
                                               "machine, so its memory need is unknown")]
        try:
            config = memory.read_config(model_dir)
        except (OSError, ValueError):
            return [Item(level="info", message=state)]
        shape = memory.model_shape(config, opts.dtype)
        max_len = min(opts.context_tokens, shape.max_position_embeddings or opts.context_tokens)
        plan = memory.plan_vllm_memory(shape, memory.weights_bytes(model_dir), gpu, max_model_len=max_len,
                                       max_num_seqs=opts.max_num_seqs,
                                       max_num_batched_tokens=opts.max_num_batched_tokens)
        if running:
            return [Item(level="info", message=f"{state}; vLLM with these settings needs {memory.fmt_gib(plan.need)}")]
        if plan.fits:
            return [Item(level="ok", message=f"GPU memory: {plan.reason}")]
        return [Item(level="error", message=f"GPU memory: {plan.reason}",
                     advice=[f"lower backends[{name!r}].server.max_num_seqs or context_tokens",
                             "or use llama.cpp, which offloads part of the layers"])]
    if kind == "llama.cpp" and model and Path(model).is_file():
        size = Path(model).stat().st_size
        if not running and size + memory.GiB // 2 > gpu.free:
            return [Item(level="warn", message=f"{state}; the model file is {memory.fmt_gib(size)}: only part of "
                                               "its layers fit on the GPU (slower)",
                         advice=["a smaller quantization (Q4_K_M) or a smaller model", "or free GPU memory"])]
        return [Item(level="ok", message=f"{state}; the model file is {memory.fmt_gib(size)}")]
    return [Item(level="info", message=state)]


def _fastapi_advice() -> str:
    return (f"vLLM's Prometheus middleware breaks with fastapi>={hc.FASTAPI_BROKEN} "
            f"({hc.INCLUDED_ROUTER_ERROR}): pip install 'fastapi<{hc.FASTAPI_BROKEN}' in vLLM's python, then restart it")


async def _fim_probe(name: str, backend: Any, timeout: float, *, vllm: bool = False) -> Item:
    started = time.perf_counter()
    first: float | None = None
    text = ""
    stream = backend.complete(PROBE)
    try:
        async with asyncio.timeout(timeout):
            async for chunk in stream:
                if chunk.text and first is None:
                    first = time.perf_counter()
                text += chunk.text
                if chunk.done:
                    break
    except TimeoutError:
        return Item(level="warn", message=f"FIM probe: no complete answer within {timeout:.0f}s "
                                          f"({len(text)} chars so far)",
                    advice=["the server is busy or slow (first request after start compiles or loads)",
                            "run the check again; if it stays slow, try a smaller model or a GPU build"])
    except BackendError as exc:
        msg = str(exc)
        if hc.INCLUDED_ROUTER_ERROR in msg:
            return Item(level="error", message=f"FIM probe failed: {msg[:300]}", advice=[_fastapi_advice()])
        if "infill" in msg.lower() and ("not supported" in msg.lower() or "501" in msg):
            return Item(level="error", message=f"FIM probe failed: {msg[:300]}",
                        advice=[f"the model has no FIM tokens: set backends[{name!r}].prompt = 'continue' (a base "
                                "model) or 'chat' (an instruct model), or use a coder model with fill-in-the-middle "
                                "(e.g. Qwen2.5-Coder)"])
        advice = ["see the server's own log; :LocalCopilot log for the plugin's side"]
        if vllm and getattr(exc, "status", 0) == 500:
            advice.insert(0, "if vLLM's log shows " + _fastapi_advice())
        return Item(level="error", message=f"FIM probe failed: {msg[:300]}", advice=advice)
    except ConfigError as exc:
        return Item(level="error", message=f"FIM probe: {exc}",
                    advice=["fix the backend's options; see :help local-copilot-config"])
    finally:
        await stream.aclose()
    now = time.perf_counter()
    template = getattr(backend, "template", None)
    hint = f" (the {template.name} template is in use)" if template is not None else ""
    style = getattr(backend, "style", "fim")
    item = hc.judge_fim_answer(probe_shown(backend, PROBE, text), PROBE.suffix, elapsed_ms=(now - started) * 1000,
                               ttft_ms=((first or now) - started) * 1000, template_hint=hint, backend=name)
    if style != "fim":  # judged on what the editor shows in that style
        item.message = item.message.replace("FIM probe", f"{style} probe", 1)
    return item


def _server_items(name: str, url: str, env: Mapping[str, str]) -> list[Item]:
    """A server local-copilot started for this backend: where its log is, whether it died."""
    from ..servers.supervisor import list_servers

    items: list[Item] = []
    try:
        servers = list_servers(env)
    except OSError:
        return items
    for s in servers:
        if s.get("backend") != name or _port(str(s.get("url", ""))) != _port(url):
            continue
        if s.get("alive"):
            items.append(Item(level="info", message=f"started by local-copilot: pid {s.get('pid')}, log {s.get('log')}"))
        else:
            rc = s.get("exit_code")
            items.append(Item(level="warn", message=f"the server local-copilot started exited"
                                                    f"{f' with code {rc}' if rc is not None else ''}",
                              advice=[f"read its log: {s.get('log')}", ":LocalCopilotBackend restart"]))
    return items


async def backend_section(name: str, bcfg: BackendConfig, opts: ServerOptions, ctx: _Ctx, *, active: bool,
                          quick: float | None = None) -> Section | None:
    """Everything about one backend. With `quick` (seconds), a backend that does not answer
    that fast gives None: it is not the active one, so it is only listed."""
    from ..servers.recipes import recipe_kind

    sec = Section(name=f"backend {name}" + (" (active)" if active else ""))
    kind = recipe_kind(name, bcfg, opts)
    level, message, status = await _reachable(name, bcfg, ctx.client, quick or 2.0)
    if quick is not None and status == 0:
        return None
    up = status in (200, 503, 401, 403, -1)  # a server answers there
    local = _is_loopback(bcfg.url)
    if local:
        sec.items.extend(await _binary_items(name, bcfg, kind, opts, ctx.env, up))
    advice: list[str] = []
    if status == 0:
        advice = _start_advice(name, bcfg, kind, opts)
    elif status == 503:
        advice = ["wait until it has loaded the model, then run this check again"]
    elif status in (401, 403) and not bcfg.api_key_env:
        advice = [f"the server wants an API key: set backends[{name!r}].api_key_env to the name of an "
                  "environment variable that holds it"]
    elif status in (401, 403):
        advice = [f"give ${bcfg.api_key_env} the key the server was started with (llama-server and vLLM: --api-key)"]
    elif status == 500 and kind == "vllm":
        advice = ["if vLLM's log shows " + _fastapi_advice(), "otherwise see vLLM's log for the error"]
    elif status != 200 and status != -1:  # (-1: the TLS message names its fix)
        advice = ["is this the right URL and kind? " + f"backends[{name!r}] has kind {bcfg.kind!r}"]
    sec.add(level, message, *advice)
    sec.items.extend(await tls_items(name, bcfg, quick or 2.0))
    if local:
        sec.items.extend(await _thread(_server_items, name, bcfg.url, ctx.env))
    model_hint = ""
    if status == 200:
        sec.items.extend(await kind_items(name, bcfg, ctx.client))
        model_hint = await _model_items(sec, name, bcfg, opts, ctx)
    if kind == "vllm" and (active or up):
        gcc = await _thread(_gcc_item, {**ctx.env, **opts.env})
        if gcc is not None:
            sec.items.append(gcc)
    if active:
        sec.items.extend(await _thread(lambda: _gpu_items(name, kind, opts, bcfg, ctx.env, running=up,
                                                          model_hint=model_hint)))
    else:
        # completions do not use it now: its problems are worth fixing, not "broken"
        for item in sec.items:
            if item.level == "error":
                item.level = "warn"
                item.message += " (not the active backend)"
    return sec


def _room(sec: Section, per_request: int, cfg: Config) -> None:
    item = hc.judge_prompt_room(per_request, cfg.n_predict, cfg.context.lines_before, cfg.context.lines_after)
    if item is not None and sec.items[-1].level == "ok":  # after a context warning it would only repeat it
        sec.items.append(item)


async def _model_items(sec: Section, name: str, bcfg: BackendConfig, opts: ServerOptions, ctx: _Ctx) -> str:
    """Model, FIM template, context per request and the live FIM probe; returns the model's
    path or id (for the GPU sizing)."""
    backend = make_backend(name, bcfg, ctx.client)
    n_predict = ctx.cfg.n_predict
    model_hint = ""
    try:
        if bcfg.kind == "llama.cpp":
            template = await backend.ensure_ready()  # type: ignore[attr-defined]
            props = backend.props  # type: ignore[attr-defined]
            model_hint = props.model_path or props.model_alias
            sec.add("ok", f"model: {props.model_alias or props.model_path or '(unnamed)'}")
            sec.items.append(style_item(name, bcfg, backend))
            if backend.style != "fim":
                pass  # no FIM prompt to tell of
            elif template is not None:
                how = "configured" if bcfg.fim_template else "read from the served vocabulary"
                sec.add("ok", f"FIM prompt: {template.name} ({how}), rendered here and sent to /completion "
                              "(the typed text last: a request can be continued)")
            else:
                family = detect_family(props.model_path or props.model_alias or "")
                sec.add("info", "FIM prompt: built by llama-server (/infill) from the model's own FIM tokens"
                        + (f"; the name says {family}" if family else ""))
            n_ctx = props.default_generation_settings.n_ctx
            if n_ctx:
                sec.items.append(hc.judge_context(n_ctx, n_predict, slots=props.total_slots, kind="llama.cpp",
                                                  backend=name))
                _room(sec, n_ctx, ctx.cfg)
        else:
            template = await backend.ensure_ready()  # type: ignore[attr-defined]
            model = backend.model  # type: ignore[attr-defined]
            model_hint = model.path or model.id
            sec.add("ok", f"model: {model.id}" + (f" ({model.owned_by})" if model.owned_by else ""))
            sec.items.append(style_item(name, bcfg, backend))
            if backend.style != "fim":
                pass  # no FIM template to tell of
            elif template is not None:
                how = "configured" if bcfg.fim_template else "detected from the model name"
                sec.add("ok", f"FIM template: {template.name} ({how})")
            else:
                sec.add("info", "FIM template: Ollama's own (the model's template has a suffix slot)")
            limit = await backend.context_limit()
            if limit:
                kind = "vllm" if model.owned_by == "vllm" else bcfg.kind
                sec.items.append(hc.judge_context(limit, n_predict, kind=kind, backend=name))
                _room(sec, limit, ctx.cfg)
    except ConfigError as exc:
        sec.add("error", str(exc), f"set backends[{name!r}].fim_template, or .prompt = 'chat' (an instruct model) "
                                   "or 'continue' (a base model), or .model; see :help local-copilot-config")
        return model_hint
    except BackendError as exc:
        sec.add("error", str(exc), f"give ${bcfg.api_key_env or 'NAME'} the server's key" if isinstance(exc, TokenRefused)
                else "check the model the server runs and backends[...].model")
        return model_hint
    vllm = bcfg.kind == "openai" and getattr(getattr(backend, "model", None), "owned_by", "") == "vllm"
    sec.items.append(await _fim_probe(name, backend, ctx.probe_timeout, vllm=vllm or "vllm" in name.lower()))
    return model_hint


# ------------------------------------------------------------------------------------ collect


async def collect(raw: Any = None, *, backend: str | None = None, config_error: str | None = None,
                  stats: Mapping[str, Any] | None = None, log_file: Path | None = None, editor: bool = True,
                  env: Mapping[str, str] | None = None, transport: httpx.AsyncBaseTransport | None = None,
                  probe_timeout: float = 10.0, quick_timeout: float = 0.3) -> Report:
    """The whole report. `raw`: the setup() table (None: no options, unless `config_error`
    says the host's last ones were rejected); `backend`: check this one as the active one;
    `editor`: called from Neovim (its own checks come from Lua) rather than the terminal."""
    env = dict(os.environ if env is None else env)
    report = Report()
    report.sections.append(python_section("host interpreter and packages" if editor else "python"))
    if not editor:
        report.sections.append(await _thread(neovim_section, env))
    cfg, options, error = load_options(raw, backend)
    error = error or config_error
    report.sections.append(config_section(cfg, error, env))
    if cfg is not None:
        timeout = httpx.Timeout(probe_timeout, connect=2.0)
        # answers bounded (limits.py): a hostile server's probe answer must not fill memory
        async with async_client(cfg.backends.values(), timeout=timeout, transport=transport) as client:
            ctx = _Ctx(cfg=cfg, env=env, client=client, probe_timeout=probe_timeout)
            names = [cfg.backend] + [n for n in cfg.backends if n != cfg.backend]
            # the next-edit backend is checked as fully as the active one
            full = {cfg.backend, cfg.next_edit.backend if cfg.next_edit.enabled else cfg.backend}
            tasks = [backend_section(n, cfg.backends[n], options.get(n, ServerOptions()), ctx, active=(n == cfg.backend),
                                     quick=None if n in full else quick_timeout) for n in names]
            # (beside the backends' checks, not after them: the report's time is bounded)
            edit_check = asyncio.ensure_future(edit_items(cfg, client, probe_timeout))
            if cfg.next_edit.enabled:
                from .next_edit import next_edit_items

                next_edit_check = asyncio.ensure_future(next_edit_items(cfg, client, probe_timeout))
            results = await asyncio.gather(*tasks, return_exceptions=True)
            edits = Section(name="instruction edits", items=await edit_check)
            if cfg.next_edit.enabled:
                next_edit = Section(name="next edits", items=await next_edit_check)
        silent = []
        for n, res in zip(names, results, strict=True):
            if isinstance(res, BaseException):
                sec = Section(name=f"backend {n}")
                sec.add("error", f"the check itself failed: {res.__class__.__name__}: {res}",
                        "please report this; :LocalCopilot log has details")
                report.sections.append(sec)
            elif res is None:
                silent.append(n)
            else:
                report.sections.append(res)
        if silent:
            sec = Section(name="other backends")
            for n in silent:
                sec.add("info", f"{n}: not running at {cfg.backends[n].url} (not the active backend, so not checked)")
            report.sections.append(sec)
        if cfg.next_edit.enabled:
            report.sections.append(next_edit)
        report.sections.append(edits)
    if stats is not None:
        report.sections.append(latency_section(stats))
    if log_file is not None:
        report.sections.append(log_section(log_file, cfg.log_level if cfg else "warn"))
    return report


def collect_sync(*args: Any, **kwargs: Any) -> Report:
    return asyncio.run(collect(*args, **kwargs))


# ------------------------------------------------------------------------------------ terminal

_TAGS = {"ok": "OK", "info": "INFO", "warn": "WARN", "error": "ERROR"}
_COLORS = {"ok": "\x1b[32m", "info": "\x1b[36m", "warn": "\x1b[33m", "error": "\x1b[31m"}


def render_text(report: Report, *, color: bool = False) -> str:
    """OK/INFO/WARN/ERROR lines under each section, advice indented below its line."""
    out: list[str] = []
    for sec in report.sections:
        out.append(("\x1b[1m" + sec.name + "\x1b[0m") if color else sec.name)
        for item in sec.items:
            tag = f"{_TAGS[item.level]:<5}"
            if color:
                tag = f"{_COLORS[item.level]}{tag}\x1b[0m"
            out.append(f"  {tag}  {item.message}")
            for a in item.advice:
                out.append(f"         - {a}")
        out.append("")
    counts = {lvl: sum(1 for s in report.sections for it in s.items if it.level == lvl) for lvl in hc.LEVELS}
    out.append(f"{counts['error']} error(s), {counts['warn']} warning(s)")
    return "\n".join(out) + "\n"
