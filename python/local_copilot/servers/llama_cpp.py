"""llama-server, or any server command, run in the foreground on loopback: the tests, the bench
and the demo run their servers this way.

llama-server is launched by the users' recipe (servers/llama_cpp_recipe.py): what a
caller needs beyond it (one slot, a thread count, a smaller context, TLS) goes in its
`ServerOptions.extra_args` or fields, the way a user's backends.NAME.server does.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from ..server_options import ServerOptions
from .llama_cpp_recipe import llama_cpp_recipe
from .ports import free_port
from .programs import INSTALL_HINTS, find_llama_server
from .recipes import Recipe

__all__ = ["LlamaServer", "wait_healthy"]


def wait_healthy(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None,
                 verify: ssl.SSLContext | bool = True, path: str = "/health") -> bool:
    """Poll `path` until 200 (llama.cpp answers 503 while loading). `verify`: how an https
    server's certificate is checked (a context that trusts its CA)."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1.0, trust_env=False, verify=verify) as client:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                return False
            try:
                if client.get(url.rstrip("/") + path).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    return False


class LlamaServer:
    """A server child process bound to 127.0.0.1 with its output in a log file: llama-server
    as users' servers are launched (`for_model`, `from_recipe`), or any command that answers
    GET `ready_path` when ready (the tests' vLLM)."""

    def __init__(self, argv: Sequence[str], *, port: int, log_file: str | Path | None = None,
                 tls: ssl.SSLContext | None = None, ready_path: str = "/health",
                 env: Mapping[str, str] | None = None) -> None:
        """`tls`: the server speaks https (llama-server --ssl-cert-file), its certificate
        checked with this context. `env`: added to this process's environment for the server."""
        self.argv = list(argv)
        self.port = port
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        self.log_file = Path(log_file) if log_file else None
        self.ready_path = ready_path
        self.env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_recipe(cls, recipe: Recipe, *, log_file: str | Path | None = None,
                    tls: ssl.SSLContext | None = None) -> LlamaServer:
        return cls(recipe.argv, port=recipe.port, log_file=log_file, tls=tls, ready_path=recipe.health_path,
                   env=recipe.env)

    @classmethod
    def for_model(cls, model: str | Path, *, options: ServerOptions | None = None, port: int | None = None,
                  log_file: str | Path | None = None, binary: str | None = None,
                  tls: ssl.SSLContext | None = None) -> LlamaServer:
        """llama-server serving `model` (a .gguf path; '' = the FIM preset) launched as the
        plugin launches it for a user whose backends.NAME.server is `options`."""
        binary = binary or find_llama_server()
        if not binary:
            raise FileNotFoundError(f"llama-server not found: {INSTALL_HINTS['llama.cpp']}")
        recipe = llama_cpp_recipe("llama.cpp", binary=binary, port=port or free_port(), weights=str(model),
                                  opts=options or ServerOptions())
        return cls.from_recipe(recipe, log_file=log_file, tls=tls)

    def start(self, timeout: float = 60.0) -> LlamaServer:
        env = {**os.environ, **self.env} if self.env else None
        if self.log_file:
            with open(self.log_file, "ab") as out:  # the child keeps its own descriptor
                self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             env=env)
        else:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env)
        if not wait_healthy(self.url, timeout, self.proc, verify=self.tls or True, path=self.ready_path):
            self.stop()
            # the class runs vLLM in the tests too: name what did not start
            raise RuntimeError(f"{Path(self.argv[0]).name} did not become healthy: {' '.join(self.argv)}")
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
