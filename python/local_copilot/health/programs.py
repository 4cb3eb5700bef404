"""The server program a launch recipe runs, as :checkhealth sees it on this machine: whether
it is installed (binary, version, vLLM's packages), how to start it by hand, what it needs of
the GPU, and its known pitfalls.

servers/recipes.py's own recipes (llama.cpp, vLLM, Ollama) each have a `Program` here, as
that module has their install hints; a kind that brings its own recipe (`Kind.launch`) brings
its hand-start command in its registry record (`Kind.manual`), and any other recipe gets the
plain `Program`: nothing to look for, the GPU only reported.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..backends import registry
from ..errors import LocalCopilotError
from . import checks as hc
from . import model_traits
from . import probes as hp
from .checks import Item, Level

if TYPE_CHECKING:
    from ..server_options import ServerOptions
    from ..servers.memory import GpuMemory

__all__ = ["Program", "fastapi_advice", "program", "served_by", "which"]


def which(exe: str, env: Mapping[str, str]) -> str | None:
    if os.sep in exe:
        return exe if os.access(exe, os.X_OK) else None
    return shutil.which(exe, path=env.get("PATH"))


def fastapi_advice() -> str:
    return (f"vLLM's Prometheus middleware breaks with fastapi>={hc.FASTAPI_BROKEN} "
            f"({hc.INCLUDED_ROUTER_ERROR}): pip install 'fastapi<{hc.FASTAPI_BROKEN}' in vLLM's python, then restart it")


class Program:
    """A server program no check here knows."""

    # the name the program gives itself in a server's answers (`owned_by`), '' = none known
    served_as = ""
    # what running without a usable NVIDIA GPU means for it
    cpu_note = "the server runs on the CPU"

    def __init__(self, manual: Any = None) -> None:
        self._manual = manual

    def manual(self, model: str, port: int) -> str | None:
        """The command that starts it by hand, or None when none is known."""
        return self._manual(model, port) if self._manual is not None else None

    def installed(self, opts: ServerOptions, env: Mapping[str, str], missing: Level, note: str) -> list[Item]:
        """Items on the program's installation (run in a thread: it may start processes);
        `missing`: the level of "not found", `note`: said after it."""
        return []

    def setup_items(self, env: Mapping[str, str]) -> list[Item]:
        """Pitfalls of the machine's set-up for it (run in a thread)."""
        return []

    def error_advice(self) -> str | None:
        """What an HTTP 500 from it most likely means, where a known pitfall makes one."""
        return None

    async def model_items(self, backend: Any) -> list[Item]:
        """What the model it serves means for ghost text, as the server tells
        (model_traits.py); `backend`: the entry's dialect, probed."""
        return []

    def gpu_items(self, name: str, state: str, gpu: GpuMemory, model: str, opts: ServerOptions,
                  env: Mapping[str, str], *, running: bool) -> list[Item]:
        """Whether the model fits on `gpu` (`state`: its memory, said)."""
        return [Item(level="info", message=state)]


class LlamaServer(Program):
    cpu_note = "llama.cpp runs on the CPU"

    def manual(self, model: str, port: int) -> str:
        return f"llama-server {f'-m {model}' if model else '--fim-qwen-1.5b-default'} --port {port}"

    def installed(self, opts: ServerOptions, env: Mapping[str, str], missing: Level, note: str) -> list[Item]:
        from ..servers.programs import INSTALL_HINTS, find_llama_server, server_command

        exe = find_llama_server()
        if not exe:
            return [Item(level=missing, message=f"llama-server not found{note}", advice=[INSTALL_HINTS["llama.cpp"]])]
        cmd = server_command(exe)
        version = hp.binary_version([*cmd, "--version"])
        # llama.cpp's single `llama` binary runs the server as `llama serve`
        program = "llama serve" if len(cmd) > 1 else "llama-server"
        return [Item(level="ok", message=f"{program} {version or '(version unknown)'} at {exe}")]

    async def model_items(self, backend: Any) -> list[Item]:
        return await model_traits.llama_server_items(backend)

    def gpu_items(self, name: str, state: str, gpu: GpuMemory, model: str, opts: ServerOptions,
                  env: Mapping[str, str], *, running: bool) -> list[Item]:
        from ..servers import memory

        if not (model and Path(model).is_file()):
            return super().gpu_items(name, state, gpu, model, opts, env, running=running)
        size = Path(model).stat().st_size
        if not running and size + memory.GiB // 2 > gpu.free:
            return [Item(level="warn", message=f"{state}; the model file is {memory.fmt_gib(size)}: only part of "
                                               "its layers fit on the GPU (slower)",
                         advice=["a smaller quantization (Q4_K_M) or a smaller model", "or free GPU memory"])]
        return [Item(level="ok", message=f"{state}; the model file is {memory.fmt_gib(size)}")]


class Vllm(Program):
    served_as = "vllm"
    cpu_note = "vLLM needs a GPU unless it is a CPU build"

    def manual(self, model: str, port: int) -> str:
        return f"vllm serve {model or 'MODEL'} --port {port}"

    def installed(self, opts: ServerOptions, env: Mapping[str, str], missing: Level, note: str) -> list[Item]:
        from ..servers import programs

        hint = programs.INSTALL_HINTS["vllm"]
        try:
            launcher = programs.find_vllm(opts.python, env)
        except LocalCopilotError as exc:
            return [Item(level=missing, message=f"{exc}{note}", advice=[hint])]
        if launcher is None:
            return [Item(level=missing, message=f"vLLM not found{note}", advice=[hint])]
        python = launcher.exe if not launcher.console else (programs.shebang_python(launcher.exe) or "")
        if not python:
            return [Item(level="ok", message=f"vLLM at {launcher.exe}")]
        pk = hp.vllm_packages(python)
        if pk.error or not pk.vllm:
            return [Item(level="warn", message=f"cannot read vLLM's version from {python}: {pk.error or 'not found'}",
                         advice=[hint])]
        return [Item(level="ok", message=f"{pk.dist} {pk.vllm} in {python}"),
                hc.judge_fastapi(python, pk.vllm, pk.fastapi, pk.requires)]

    def setup_items(self, env: Mapping[str, str]) -> list[Item]:
        facts = hp.nvcc_facts(env)
        if facts is None:
            return []
        release, max_gcc = hc.nvcc_max_gcc(*facts)
        gcc = hc.judge_gcc(hp.gcc_version(env), release, max_gcc, env)
        return [gcc] if gcc is not None else []

    def error_advice(self) -> str:
        return "if vLLM's log shows " + fastapi_advice()

    def gpu_items(self, name: str, state: str, gpu: GpuMemory, model: str, opts: ServerOptions,
                  env: Mapping[str, str], *, running: bool) -> list[Item]:
        from ..servers import memory

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


class OllamaServe(Program):
    def manual(self, model: str, port: int) -> str:
        return f"OLLAMA_HOST=127.0.0.1:{port} ollama serve"

    async def model_items(self, backend: Any) -> list[Item]:
        return await model_traits.ollama_items(backend)

    def installed(self, opts: ServerOptions, env: Mapping[str, str], missing: Level, note: str) -> list[Item]:
        from ..servers.programs import INSTALL_HINTS

        exe = which("ollama", env)
        if not exe:
            return [Item(level=missing, message=f"ollama not found{note}", advice=[INSTALL_HINTS["ollama"]])]
        version = hp.binary_version([exe, "--version"])
        return [Item(level="ok", message=f"ollama {version or ''} at {exe}".replace("  ", " "))]


# servers/recipes.py's own recipes, by their names there
_OWN: dict[str, Program] = {"llama.cpp": LlamaServer(), "vllm": Vllm(), "ollama": OllamaServe()}


def program(recipe: str | None) -> Program:
    """The program launch recipe `recipe` runs (None: the entry has none)."""
    if recipe in _OWN:
        return _OWN[recipe]
    kind = next((registry.get(k) for k in registry.names() if recipe and registry.get(k).recipe == recipe), None)
    return Program(kind.manual if kind is not None else None)


def served_by(server: str) -> Program | None:
    """The program whose name a server gives itself (`owned_by`), where one here knows it."""
    return next((p for p in _OWN.values() if p.served_as and p.served_as == server), None)
