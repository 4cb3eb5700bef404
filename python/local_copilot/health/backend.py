"""One backend entry's section of the health report: whether its server answers, the program
behind it on this machine (programs.py), what the server tells of its model (the dialect's
`described()`), its prompt style and context, and a live FIM probe.

Nothing here names a kind: what differs between kinds comes from the registry and the
dialects, what differs between server programs from programs.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec

from ..backend_config import BackendConfig
from ..backends import FimRequest, make_backend, registry
from ..backends.base import HttpBackend
from ..backends.models import describe, list_models
from ..config import Config
from ..errors import BackendError, ConfigError, ModelLoading, TokenRefused
from ..server_options import ServerOptions
from ..transport.access import auth_headers, tls_failure, token_refused
from . import checks as hc
from .checks import Item, Level
from .kinds import kind_items
from .programs import Program, fastapi_advice, program, served_by, which
from .section import Section
from .styles import probe_shown, style_item
from .tls import tls_items

__all__ = ["PROBE", "Checking", "backend_section"]

# the FIM probe: a function body whose middle is obvious; the suffix has long lines to spot echoes
PROBE = FimRequest(
    prefix='def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n',
    middle="        return ",
    suffix="\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n\nprint(fibonacci(10))\n",
    n_predict=16,
    t_max_predict_ms=2000,
)


class Checking(msgspec.Struct, kw_only=True):
    """What one backend check needs besides the backend itself."""

    cfg: Config
    env: dict[str, str]
    client: Any  # httpx.AsyncClient
    probe_timeout: float


def _is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def port_of(url: str) -> int:
    parts = urlsplit(url)
    try:
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return 0


def start_hint(name: str, bcfg: BackendConfig) -> str | None:
    """How to start entry `name`'s server in Neovim, when nothing answers at its URL: the
    command that starts it and the one to run by hand; None for a server on another machine,
    or one nothing here knows how to start."""
    from ..servers.recipes import recipe_kind

    if not _is_loopback(bcfg.url):
        return None
    opts = bcfg.server
    recipe = recipe_kind(name, bcfg, opts)
    manual = " ".join(bcfg.cmd) if bcfg.cmd else (
        f"llama-server --models-dir {opts.models_dir} --port {port_of(bcfg.url)}" if opts.models_dir
        else program(recipe).manual(opts.weights or bcfg.model, port_of(bcfg.url)))
    ways = ([f":LocalCopilotBackend start {name}"] if recipe or bcfg.cmd else []) + ([manual] if manual else [])
    return "start it with " + ", or run ".join(ways) if ways else None


def _start_advice(name: str, bcfg: BackendConfig, prog: Program, opts: ServerOptions) -> list[str]:
    if not _is_loopback(bcfg.url):
        return [f"check that the server at {bcfg.url} runs and this machine can reach it"]
    advice = [f"start it: `local-copilot start {name}` in a terminal, or :LocalCopilotBackend {name}"]
    if bcfg.cmd:
        advice.append(f"or run backends[{name!r}].cmd yourself: {' '.join(bcfg.cmd)}")
    else:
        manual = (f"llama-server --models-dir {opts.models_dir} --port {port_of(bcfg.url)}" if opts.models_dir
                  else prog.manual(opts.weights or bcfg.model, port_of(bcfg.url)))
        if manual:
            advice.append(f"or run it yourself: {manual}")
    advice.append(f"or point backends[{name!r}].url at where your server listens")
    return advice


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


async def _program_items(name: str, bcfg: BackendConfig, prog: Program, opts: ServerOptions,
                         env: Mapping[str, str], up: bool) -> list[Item]:
    """Items about the server program on this machine (binary, version, vLLM's packages)."""
    missing: Level = "info" if up else "error"
    missing_note = " (a server answers anyway)" if up else ""
    if not bcfg.cmd:
        return list(await _thread(prog.installed, opts, env, missing, missing_note))
    if which(bcfg.cmd[0], env):
        return [Item(level="ok", message=f"launch command: {' '.join(bcfg.cmd)[:160]}")]
    return [Item(level=missing, message=f"backends[{name!r}].cmd: {bcfg.cmd[0]} not found{missing_note}",
                 advice=[f"install it or fix backends[{name!r}].cmd"])]


def _gpu_items(name: str, prog: Program, opts: ServerOptions, bcfg: BackendConfig, env: Mapping[str, str],
               *, running: bool, model_hint: str) -> list[Item]:
    from ..servers import memory

    gpus = memory.query_gpus(timeout=5.0)
    if gpus is None:
        return [Item(level="info", message=f"no NVIDIA GPU found (nvidia-smi missing or failing): {prog.cpu_note}")]
    gpu = memory.pick_gpu(gpus, env)
    if gpu is None:
        return [Item(level="info", message="CUDA_VISIBLE_DEVICES hides the GPUs: the server runs on the CPU")]
    state = (f"GPU {gpu.index}: {memory.fmt_gib(gpu.free)} free of {memory.fmt_gib(gpu.total)}"
             + (" (the running server's share is already taken)" if running else ""))
    return prog.gpu_items(name, state, gpu, opts.weights or bcfg.model or model_hint, opts, env, running=running)


async def _fim_probe(name: str, backend: Any, timeout: float, *, on_500: str | None = None) -> Item:
    """The probe's completion, judged as the editor would show it; `on_500`: what an HTTP 500
    most likely means on this server."""
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
            return Item(level="error", message=f"FIM probe failed: {msg[:300]}", advice=[fastapi_advice()])
        if "infill" in msg.lower() and ("not supported" in msg.lower() or "501" in msg):
            return Item(level="error", message=f"FIM probe failed: {msg[:300]}",
                        advice=[f"the model has no FIM tokens: set backends[{name!r}].prompt = 'continue' (a base "
                                "model) or 'chat' (an instruct model), or use a coder model with fill-in-the-middle "
                                "(e.g. Qwen2.5-Coder)"])
        advice = ["see the server's own log; :LocalCopilot log for the plugin's side"]
        if on_500 and getattr(exc, "status", 0) == 500:
            advice.insert(0, on_500)
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
    from ..servers.directories import list_servers

    items: list[Item] = []
    try:
        servers = list_servers(env)
    except OSError:
        return items
    for s in servers:
        if s.get("backend") != name or port_of(str(s.get("url", ""))) != port_of(url):
            continue
        if s.get("alive"):
            items.append(Item(level="info", message=f"started by local-copilot: pid {s.get('pid')}, log {s.get('log')}"))
        else:
            rc = s.get("exit_code")
            items.append(Item(level="warn", message=f"the server local-copilot started exited"
                                                    f"{f' with code {rc}' if rc is not None else ''}",
                              advice=[f"read its log: {s.get('log')}", ":LocalCopilotBackend restart"]))
    return items


async def backend_section(name: str, bcfg: BackendConfig, opts: ServerOptions, ctx: Checking, *, active: bool,
                          quick: float | None = None) -> Section | None:
    """Everything about one backend. With `quick` (seconds), a backend that does not answer
    that fast gives None: it is not the active one, so it is only listed."""
    from ..servers.recipes import recipe_kind

    sec = Section(name=f"backend {name}" + (" (active)" if active else ""))
    prog = program(recipe_kind(name, bcfg, opts))
    level, message, status = await _reachable(name, bcfg, ctx.client, quick or 2.0)
    if quick is not None and status == 0:
        return None
    up = status in (200, 503, 401, 403, -1)  # a server answers there
    local = _is_loopback(bcfg.url)
    if local:
        sec.items.extend(await _program_items(name, bcfg, prog, opts, ctx.env, up))
        if opts.models_dir and not bcfg.cmd:
            sec.items.extend(_models_dir_items(name, opts))
    advice: list[str] = []
    on_500 = prog.error_advice()
    if status == 0:
        advice = _start_advice(name, bcfg, prog, opts)
    elif status == 503:
        advice = ["wait until it has loaded the model, then run this check again"]
    elif status in (401, 403) and not bcfg.api_key_env:
        advice = [f"the server wants an API key: set backends[{name!r}].api_key_env to the name of an "
                  "environment variable that holds it"]
    elif status in (401, 403):
        advice = [f"give ${bcfg.api_key_env} the key the server was started with (llama-server and vLLM: --api-key)"]
    elif status == 500 and on_500:
        advice = [on_500, "otherwise see the server's own log for the error"]
    elif status != 200 and status != -1:  # (-1: the TLS message names its fix)
        advice = ["is this the right URL and kind? " + f"backends[{name!r}] has kind {bcfg.kind!r}"]
    sec.add(level, message, *advice)
    sec.items.extend(await tls_items(name, bcfg, quick or 2.0))
    if local:
        sec.items.extend(await _thread(_server_items, name, bcfg.url, ctx.env))
    model_hint = ""
    if status == 200:
        sec.items.extend(await kind_items(name, bcfg, ctx.client))
        sec.items.extend(await _listed_models(name, bcfg, ctx.client))
        model_hint = await _model_items(sec, name, bcfg, prog, ctx)
    if active or up:
        sec.items.extend(await _thread(prog.setup_items, {**ctx.env, **opts.env}))
    if active:
        sec.items.extend(await _thread(lambda: _gpu_items(name, prog, opts, bcfg, ctx.env, running=up,
                                                          model_hint=model_hint)))
    else:
        # completions do not use it now: its problems are worth fixing, not "broken"
        for item in sec.items:
            if item.level == "error":
                item.level = "warn"
                item.message += " (not the active backend)"
    return sec


def _models_dir_items(name: str, opts: ServerOptions) -> list[Item]:
    from ..servers.llama_cpp_recipe import models_dir_problem

    problem = models_dir_problem(opts.models_dir)
    if problem is None:
        return [Item(level="ok",
                     message=f"models folder {opts.models_dir}: the server is started as a router-mode llama-server")]
    return [Item(level="error", message=f"backends[{name!r}].server.models_dir: {problem}",
                 advice=["give a folder of .gguf files (llama-server --models-dir)"])]


async def _listed_models(name: str, bcfg: BackendConfig, client: httpx.AsyncClient) -> list[Item]:
    """The models a server serving several lists (a router-mode llama-server with each one's
    state, a llama-swap-style proxy), and whether the entry's `model` is one of them."""
    backend = HttpBackend(name, bcfg, client)
    try:
        models = await list_models(backend)
    except BackendError:
        return []  # (the reachability item above says why)
    finally:
        backend.close()
    if len(models) < 2 and not any(m.state and m.state != "loaded" for m in models):
        return []  # one model, served as it was started: the model item says which
    items = [Item(level="info", message=f"the server serves {len(models)} models: {describe(models)}")]
    if bcfg.model and all(m.id != bcfg.model for m in models):
        items.append(Item(level="error", message=f"backends[{name!r}].model = {bcfg.model!r} is not one of them",
                          advice=[f"set backends[{name!r}].model to one of them, or :LocalCopilotBackend model NAME"]))
    elif not bcfg.model:
        items[0].advice = [f"set backends[{name!r}].model to the one to use, or :LocalCopilotBackend model NAME"]
    return items


def _room(sec: Section, per_request: int, cfg: Config) -> None:
    item = hc.judge_prompt_room(per_request, cfg.n_predict, cfg.context.lines_before, cfg.context.lines_after)
    if item is not None and sec.items[-1].level == "ok":  # after a context warning it would only repeat it
        sec.items.append(item)


async def _model_items(sec: Section, name: str, bcfg: BackendConfig, prog: Program, ctx: Checking) -> str:
    """Model, FIM template, context per request and the live FIM probe; returns the model's
    path or id (for the GPU sizing)."""
    backend = make_backend(name, bcfg, ctx.client)
    deadline = time.monotonic() + ctx.probe_timeout
    try:
        while True:
            try:
                served = await backend.described()
                break
            except ModelLoading as exc:  # a router loads the entry's model: the check waits for it
                if time.monotonic() >= deadline:
                    sec.add("warn", f"{exc} (still, after {ctx.probe_timeout:.0f}s)",
                            "run this check again once it has loaded it")
                    return ""
                await asyncio.sleep(0.5)
    except ConfigError as exc:
        sec.add("error", str(exc), f"set backends[{name!r}].fim_template, or .prompt = 'chat' (an instruct model) "
                                   "or 'continue' (a base model), or .model; see :help local-copilot-config")
        return ""
    except BackendError as exc:
        sec.add("error", str(exc), f"give ${bcfg.api_key_env or 'NAME'} the server's key" if isinstance(exc, TokenRefused)
                else "check the model the server runs and backends[...].model")
        return ""
    sec.add("ok", f"model: {served.model}")
    sec.items.append(style_item(name, bcfg, backend))
    if served.prompt is not None:
        sec.add(*served.prompt)
    if served.context:
        sec.items.append(hc.judge_context(served.context, ctx.cfg.n_predict, slots=served.slots, backend=name,
                                          more=backend.context_advice))
        _room(sec, served.context, ctx.cfg)
    sec.items.extend(await prog.model_items(backend))
    by_server = served_by(served.program)
    on_500 = prog.error_advice() or (by_server.error_advice() if by_server is not None else None)
    sec.items.append(await _fim_probe(name, backend, ctx.probe_timeout, on_500=on_500))
    return served.hint
