"""The health report: one source for `:checkhealth local_copilot` and `local-copilot doctor`.

`collect()` returns a `Report` (sections of items, each OK/INFO/WARN/ERROR with advice); the
Neovim host hands it to Lua as plain data (health.lua only renders it) and the CLI prints it
with `render_text()`. Verdicts live in checks.py, fact gathering in probes.py,
each backend entry's section in backend.py; this module assembles the report: what to look at,
in which order, and the bound on the time it takes.

API keys are never printed: only whether the variable `api_key_env` names is set.
"""

from __future__ import annotations

import asyncio
import copy
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from ..config import Config, load_config
from ..errors import ConfigError
from ..server_options import ServerOptions, server_options
from ..transport.access import async_client
from . import checks as hc
from . import probes as hp
from .backend import PROBE, Checking, backend_section
from .checks import Item
from .edits import edit_items
from .section import Report, Section
from .tls import judge_tls_verify

__all__ = ["Item", "Section", "Report", "collect", "collect_sync", "render_text", "PROBE", "REQUIRED_PACKAGES"]

# (distribution, minimum) the Python host needs; the same floors as pyproject.toml
REQUIRED_PACKAGES = (("pynvim", "0.5"), ("httpx", "0.27"), ("msgspec", "0.18"), ("platformdirs", "4"))
# what only the language server needs (`lsp = true`, `local-copilot lsp`): ghost text runs without
LSP_PACKAGES = (("pygls", "2.0"), ("lsprotocol", "2025.0.0"))
MIN_PYTHON = (3, 11)

LOG_WARN_BYTES = 50 * 1024 * 1024
SLOW_TTFT_MS = 1000.0


# ------------------------------------------------------------------------------------ sections


def python_section(name: str = "Python host") -> Section:
    sec = Section(name=name)
    v = sys.version_info
    where = f"{v.major}.{v.minor}.{v.micro} at {sys.executable}"
    if (v.major, v.minor) < MIN_PYTHON:
        sec.add("error", f"python {where}: local-copilot needs {'.'.join(map(str, MIN_PYTHON))} or newer",
                "set g:local_copilot_python to a newer python, or run the build (require('local_copilot.install')"
                ".build()), which makes the plugin's own .venv")
    else:
        sec.add("ok", f"python {where}")
    missing = []
    every = " ".join(d for d, _ in REQUIRED_PACKAGES + LSP_PACKAGES)
    for dist, minimum in REQUIRED_PACKAGES + LSP_PACKAGES:
        version = hp.package_version(dist)
        if not version and (dist, minimum) in LSP_PACKAGES:
            sec.add("warn", f"{dist} is not installed in this python: completion menus (lsp = true) and "
                    "`local-copilot lsp` need it", f"{sys.executable} -m pip install {every}")
        elif not version:
            missing.append(dist)
            sec.add("error", f"{dist} is not installed in this python", f"{sys.executable} -m pip install {every}")
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


def config_section(cfg: Config | None, error: str | None, env: Mapping[str, str],
                   source: Item | None = None) -> Section:
    """`source`: where the options come from (the first line)."""
    sec = Section(name="configuration")
    if source is not None:
        sec.items.append(source)
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


# ------------------------------------------------------------------------------------ collect


async def collect(raw: Any = None, *, backend: str | None = None, config_error: str | None = None,
                  stats: Mapping[str, Any] | None = None, log_file: Path | None = None, editor: bool = True,
                  env: Mapping[str, str] | None = None, transport: httpx.AsyncBaseTransport | None = None,
                  probe_timeout: float = 10.0, quick_timeout: float = 0.3,
                  options_source: Item | None = None) -> Report:
    """The whole report. `raw`: the setup() table (None: no options, unless `config_error`
    says the host's last ones were rejected); `backend`: check this one as the active one;
    `editor`: called from Neovim (its own checks come from Lua) rather than the terminal;
    `options_source`: where `raw` came from (in Neovim: the options in force)."""
    env = dict(os.environ if env is None else env)
    report = Report()
    report.sections.append(python_section("host interpreter and packages" if editor else "python"))
    if not editor:
        report.sections.append(await asyncio.to_thread(neovim_section, env))
    cfg, options, error = load_options(raw, backend)
    error = error or config_error
    if options_source is None and editor:
        options_source = Item(level="info", message="options in force: the ones given to setup() in this Neovim "
                                                    "(a config.toml is read by the local-copilot command only)")
    report.sections.append(config_section(cfg, error, env, options_source))
    if cfg is not None:
        timeout = httpx.Timeout(probe_timeout, connect=2.0)
        # answers bounded (limits.py): a hostile server's probe answer must not fill memory
        async with async_client(cfg.backends.values(), timeout=timeout, transport=transport) as client:
            ctx = Checking(cfg=cfg, env=env, client=client, probe_timeout=probe_timeout)
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
