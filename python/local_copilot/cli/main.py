"""`local-copilot`: the plugin's command line.

    local-copilot start  BACKEND [--config FILE] [--url URL] [--model M] [--cmd 'llama-server ...'] ...
    local-copilot stop   BACKEND
    local-copilot status [BACKEND] [--json]
    local-copilot doctor [BACKEND] [--config FILE] [--url URL] [--json]
    local-copilot complete FILE[:LINE[:COL]] [--backend NAME] [--config FILE] [--url URL] [--json]
    local-copilot bench  --backend NAME=URL [--backend NAME=URL ...] [-n TOKENS] [--concurrency 1,2,4,8]
    local-copilot lsp    [--config FILE]   (a language server on stdin/stdout)

BACKEND is a name from the configuration (built-ins: llama.cpp, vllm, ollama, openai) or
`auto`. The configuration is the same table as `setup()` takes, from --config, or
$LOCAL_COPILOT_CONFIG, or config.toml / config.json in the user config dir; flags override it.
A server started here is pinned: it keeps running when Neovims come and go, until `stop`.

Each subcommand is a `_cmd_*` function registered in `build_parser()`; add new ones there.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from ..backend_config import BackendConfig
from ..config import load_config
from ..errors import BackendError, ConfigError, LocalCopilotError, PrivateText, ServerUnavailable
from ..server_options import ServerOptions, server_options
from ..transport.limits import clip_message
from . import about
from .config_file import config_file, read_config_file

__all__ = ["main", "build_parser", "resolve_backend"]


# ------------------------------------------------------------------------------------ configuration


def _flag_overrides(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """(backend fields, server options) given on the command line."""
    backend: dict[str, Any] = {}
    for key in ("url", "model", "kind"):
        if getattr(args, key, None):
            backend[key] = getattr(args, key)
    if getattr(args, "cmd", None):
        backend["cmd"] = shlex.split(args.cmd)
    server: dict[str, Any] = {}
    for key in ("weights", "models_dir", "context_tokens", "parallel", "max_num_seqs", "max_num_batched_tokens", "dtype",
                "gpu_memory_utilization", "python", "startup_timeout_s"):
        value = getattr(args, key, None)
        if value is not None:
            server[key] = value
    if getattr(args, "extra_arg", None):
        server["extra_args"] = list(args.extra_arg)
    if getattr(args, "env", None):
        env = {}
        for item in args.env:
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"--env {item!r}: expected KEY=VALUE")
            env[key] = value
        server["env"] = env
    return backend, server


def resolve_backend(name: str, raw: dict[str, Any], args: argparse.Namespace | None = None
                    ) -> tuple[dict[str, BackendConfig], dict[str, ServerOptions]]:
    """All backends of the configuration (with this command's flags applied to `name`) and their
    server options."""
    raw = copy.deepcopy(raw)
    backends_raw = raw.get("backends") or {}
    if not isinstance(backends_raw, dict):
        raise ConfigError("Expected `object`, got `array` - at `$.backends`")
    # `server` is read here, so this works whether or not BackendConfig has the field yet
    servers_raw = {k: (v or {}).pop("server", None) for k, v in backends_raw.items() if isinstance(v, dict)}
    if args is not None and name != "auto":
        fields, server = _flag_overrides(args)
        backends_raw[name] = {**(backends_raw.get(name) or {}), **fields}
        if server:
            servers_raw[name] = {**(servers_raw.get(name) or {}), **server}
    raw["backends"] = backends_raw
    raw.pop("backend", None)
    cfg = load_config(raw)
    options = {}
    for key, backend in cfg.backends.items():
        try:
            options[key] = server_options(backend, servers_raw.get(key))
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("`$.server", f"`$.backends.{key}.server")) from None
    return cfg.backends, options


# ------------------------------------------------------------------------------------ commands


def _supervisor(name: str, backends: dict[str, BackendConfig], options: dict[str, ServerOptions]) -> Any:
    from ..servers.supervisor import Supervisor

    if name not in backends:
        raise ConfigError(f"unknown backend {name!r}; choose one of: {', '.join(sorted(backends))}, auto")
    return Supervisor(name, backends[name], options[name])


def _pick(args: argparse.Namespace, backends: dict[str, BackendConfig], options: dict[str, ServerOptions]) -> str:
    if args.backend != "auto":
        return str(args.backend)
    from ..servers.auto import detect_backend

    choice = detect_backend(backends, options=options.get("vllm"))
    print(f"auto: {choice.reason}", file=sys.stderr)
    return choice.backend


def _progress(quiet: bool) -> Any:
    if quiet:
        return None
    tty = sys.stderr.isatty()
    last = [""]

    def show(elapsed: float, line: str) -> None:
        if tty:  # one line, redrawn
            sys.stderr.write(f"\r\x1b[K[{elapsed:5.1f}s] {line[:100]}")
        elif line and line != last[0]:  # a log: only what changed
            sys.stderr.write(f"[{elapsed:5.1f}s] {line[:200]}\n")
        last[0] = line
        sys.stderr.flush()

    return show


def _cmd_start(args: argparse.Namespace) -> int:
    backends, options = resolve_backend(args.backend, read_config_file(config_file(args.config)), args)
    name = _pick(args, backends, options)
    sup = _supervisor(name, backends, options)
    for note in sup.recipe.notes:
        print(f"{name}: {note}", file=sys.stderr)
    t0 = time.monotonic()
    try:
        status = sup.start(_progress(args.quiet), pin=True, register=False)
    finally:
        if not args.quiet and sys.stderr.isatty():
            sys.stderr.write("\r\x1b[K")
    if status.state == "external":
        print(f"{name}: a server already answers at {status.url} (not started by local-copilot)")
    else:
        print(f"{name}: ready at {status.url} (pid {status.pid}, {time.monotonic() - t0:.1f}s; "
              f"log {status.log_path})")
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    backends, options = resolve_backend(args.backend, read_config_file(config_file(args.config)), args)
    sup = _supervisor(args.backend, backends, options)
    if sup.stop():
        print(f"{args.backend}: stopped")
    else:
        print(f"{args.backend}: not running (nothing local-copilot started on {sup.url})")
    return 0


def _fmt_status(s: Any) -> str:
    parts = [f"{s.backend:<10}", f"{s.state:<8}", s.url]
    if s.pid:
        parts.append(f"pid {s.pid}")
    if s.state in ("ready", "starting"):
        parts.append(f"users {s.users}{' (pinned)' if s.pinned else ''}")
        parts.append(f"up {s.uptime_s:.0f}s")
    if s.error:
        parts.append(s.error)
    if s.pid or s.state in ("crashed", "failed"):
        parts.append(f"log {s.log_path}")
    return "  ".join(parts)


def _cmd_status(args: argparse.Namespace) -> int:
    backends, options = resolve_backend(args.backend or "", read_config_file(config_file(args.config)),
                                        args if args.backend else None)
    names = [args.backend] if args.backend else list(backends)
    statuses = []
    for name in names:
        try:
            statuses.append(_supervisor(name, backends, options).status())
        except LocalCopilotError:
            if args.backend:
                raise  # asked for it by name: say why (e.g. a remote URL)
    others: list[dict[str, Any]] = []
    if not args.backend:  # also servers started for backends or ports this configuration does not name
        from ..servers.directories import list_servers

        known = {(s.backend, s.url) for s in statuses}
        others = [o for o in list_servers() if o.get("alive") and (o.get("backend"), o.get("url")) not in known]
    if args.json:
        print(msgspec.json.encode([*statuses, *others]).decode())
    else:
        for s in statuses:
            print(_fmt_status(s))
        for o in others:
            print(f"{o.get('backend', '?'):<10}  running   {o.get('url')}  pid {o.get('pid')}  log {o.get('log')}")
    running = bool(others) or any(s.state in ("ready", "starting", "external") for s in statuses)
    return 0 if running else 3  # 3 = not running, as LSB status commands do


def _flagged_backend(args: argparse.Namespace, raw: dict[str, Any]) -> tuple[str, bool]:
    """The backend a command is about (its BACKEND/--backend, else the configured one, else
    llama.cpp), with the command's --url/--kind/--model/--cmd applied to it in `raw`; and
    whether any such flag was given."""
    name = args.backend or raw.get("backend") or "llama.cpp"
    fields, _ = _flag_overrides(args)
    if fields:
        backends = raw.setdefault("backends", {})
        if isinstance(backends, dict):
            backends[name] = {**(backends.get(name) or {}), **fields}
    return name, bool(fields)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from ..health import report as diagnostics
    from ..log import log_path

    path = config_file(args.config)
    raw = read_config_file(path)
    name, flagged = _flagged_backend(args, raw)
    report = diagnostics.collect_sync(raw, backend=args.backend or (name if flagged else None), editor=False,
                                      log_file=log_path(), probe_timeout=args.timeout,
                                      options_source=about.config_item(args.config, path))
    python = next((s for s in report.sections if s.name == "python"), None)
    if python is not None:
        python.items.insert(0, about.install_item())
    if args.json:
        print(msgspec.json.encode(report).decode())
    else:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        sys.stdout.write(diagnostics.render_text(report, color=color))
    return 1 if report.broken else 0


def _position(spec: str) -> tuple[str, int | None, int | None]:
    """FILE, FILE:LINE or FILE:LINE:COL (1-based; `-` is standard input). A name that exists
    as a file is taken as one, colons and all."""
    readings: list[tuple[str, int | None, int | None]] = [(spec, None, None)]
    head, _, last = spec.rpartition(":")
    if head and last.isdigit():
        readings.append((head, int(last), None))
        first, _, mid = head.rpartition(":")
        if first and mid.isdigit():
            readings.append((first, int(mid), int(last)))
    for reading in readings:
        if reading[0] == "-" or Path(reading[0]).is_file():
            return reading
    return readings[-1]  # no such file: the error names the file without the position


def _cmd_complete(args: argparse.Namespace) -> int:
    from ..privacy.binary import BINARY_HEAD, binary_reason
    from .oneshot import complete_text

    path, line, col = _position(args.file)
    if path == "-":
        text, path = sys.stdin.read(), ""
    else:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
        # a binary file (git's rule) is no text to complete: its bytes are not sent either
        binary = binary_reason(data[:BINARY_HEAD], "utf-8", more=len(data) > BINARY_HEAD)
        if binary is not None:
            raise PrivateText(f"not sent: {path} is {binary}")
        text = data.decode("utf-8", errors="surrogateescape")
    raw = read_config_file(config_file(args.config))
    name, _ = _flagged_backend(args, raw)
    raw["backend"] = name
    try:
        answer = complete_text(raw, text, path=path, line=line, col=col)
    except ServerUnavailable as exc:
        if not exc.unreachable:  # loading or slow: running, so the hint would mislead
            raise
        raise BackendError(f"{exc} (is its server running? `local-copilot status {name}`)") from None
    if args.json:
        print(json.dumps({"backend": answer.backend, "text": answer.text, "seconds": round(answer.seconds, 3),
                          "context": answer.context}))
    else:
        sys.stdout.write(answer.text + ("\n" if answer.text and not answer.text.endswith("\n") else ""))
    return 0


def _cmd_lsp(args: argparse.Namespace) -> int:
    from ..lsp.server import CompletionServer

    # an options file that cannot be read does not keep the editor from a working server: the
    # client's options are complete, and the server says what is wrong with the file
    try:
        base, problem = read_config_file(config_file(args.config)), ""
    except ConfigError as exc:
        base, problem = {}, str(exc)
    server = CompletionServer(base, file_problem=problem)
    # stdout carries the protocol alone: whatever else would write there (a library's print,
    # a child's output) goes to stderr, which clients keep as the server's log
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    # 0 after the client's shutdown, 1 when it exits without one (the protocol's rule)
    return server.serve(sys.stdin.buffer, protocol_out)


def _cmd_bench(args: argparse.Namespace) -> int:
    from ..backend_bench.cli import run

    return run(args, read_config_file(config_file(args.config)))


# ------------------------------------------------------------------------------------ parser


def _backend_flags(p: argparse.ArgumentParser, *, server: bool) -> None:
    from ..backends import registry  # the dialects load only when the CLI parses

    p.add_argument("--config", metavar="FILE", help="JSON or TOML file with the setup() options")
    p.add_argument("--url", help="the backend's URL (its port is where the server listens)")
    p.add_argument("--kind", choices=registry.names(), help="the wire dialect of a new backend")
    p.add_argument("--model", help="model name (vLLM/Ollama) or .gguf path (llama.cpp)")
    p.add_argument("--cmd", help="launch command, used verbatim (shell-quoted string)")
    if not server:
        return
    g = p.add_argument_group("server options (backends.NAME.server)")
    g.add_argument("--weights", help="what the server loads, when it differs from --model")
    g.add_argument("--models-dir", metavar="DIR",
                   help="llama.cpp: a folder of .gguf models served by one router-mode llama-server "
                        "(--model names the one to use)")
    g.add_argument("--context-tokens", type=int, help="tokens one request may need (default 8192)")
    g.add_argument("--parallel", type=int, help="llama.cpp slots (default: llama-server's own)")
    g.add_argument("--max-num-seqs", type=int, help="vLLM --max-num-seqs (default 8)")
    g.add_argument("--max-num-batched-tokens", type=int, help="vLLM --max-num-batched-tokens (default 4096)")
    g.add_argument("--dtype", help="vLLM --dtype")
    g.add_argument("--gpu-memory-utilization", type=float, help="vLLM, instead of the computed value")
    g.add_argument("--python", help="python of a venv with vLLM")
    g.add_argument("--timeout", dest="startup_timeout_s", type=float, help="seconds to wait for readiness")
    g.add_argument("--extra-arg", action="append", metavar="ARG",
                   help="append ARG to the server's command (write --extra-arg=-t for a dash)")
    g.add_argument("--env", action="append", metavar="KEY=VALUE", help="environment of the server")


class _Version(argparse.Action):
    """--version: several lines, as they are (argparse's own action rewraps them into one)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(about.version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="local-copilot", description="local-copilot.nvim from the terminal",
                                     epilog=about.help_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version, help="the version, where this command and its python are")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("start", help="start a backend's server (or reuse the running one) and wait until ready")
    p.add_argument("backend", help="backend name, or auto")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    _backend_flags(p, server=True)
    p.set_defaults(func=_cmd_start)

    p = sub.add_parser("stop", help="stop the server local-copilot started for a backend")
    p.add_argument("backend")
    _backend_flags(p, server=False)
    p.set_defaults(func=_cmd_stop)

    p = sub.add_parser("status", help="state of the backends' servers (exit 3 when none runs)")
    p.add_argument("backend", nargs="?")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _backend_flags(p, server=False)
    p.set_defaults(func=_cmd_status)

    p = sub.add_parser("doctor", help="check the set-up and the backends, like :checkhealth local_copilot "
                                      "(exit 1 when something is broken)")
    p.add_argument("backend", nargs="?", help="check this backend as the active one (default: the configured one)")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds the live FIM probe may take (default 10)")
    _backend_flags(p, server=False)
    p.set_defaults(func=_cmd_doctor)

    p = sub.add_parser("complete", help="print the suggestion the plugin would show at a spot of a file "
                                        "(the backend must be running)")
    p.add_argument("file", metavar="FILE[:LINE[:COL]]",
                   help="the file (- for standard input) and the cursor: 1-based line, and column in bytes as "
                        "Neovim counts it (one past the end is the end of the line); default: the end of the file")
    p.add_argument("--backend", help="the backend to ask (default: the configured one, else llama.cpp)")
    p.add_argument("--json", action="store_true", help='{"backend", "text", "seconds", "context"} instead of the text')
    _backend_flags(p, server=False)
    p.set_defaults(func=_cmd_complete)

    p = sub.add_parser("lsp", help="a language server on stdin/stdout (textDocument/completion and "
                                   "inlineCompletion) taking setup()'s options as initializationOptions")
    p.add_argument("--config", metavar="FILE", help="JSON or TOML file with the setup() options "
                                                    "(initializationOptions go over it)")
    p.add_argument("--stdio", action="store_true", help="accepted for clients that pass it: stdio is the only transport")
    p.set_defaults(func=_cmd_lsp)

    from ..backend_bench.cli import add_arguments

    p = sub.add_parser("bench", help="measure backends: FIM latency and a concurrency sweep, side by side")
    add_arguments(p)
    p.set_defaults(func=_cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except LocalCopilotError as exc:
        # a server's words may be in it: no terminal escapes, bounded (limits.py)
        print(f"local-copilot: {clip_message(str(exc), 2000)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
