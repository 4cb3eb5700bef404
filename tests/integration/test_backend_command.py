""":LocalCopilotBackend in a real Neovim: it starts a real llama-server through the launch
recipe, switches when it is ready, shows it, restarts it after kill -9, and stops it."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_copilot.config import builtin_backends
from local_copilot.servers.ports import free_port

from ..helpers import wait_for
from .nvim_session import lua, messages, start_nvim, wait_ghost

pytestmark = pytest.mark.integration


def healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_switch_starts_the_server_then_restart_after_kill_and_stop(
    models: dict[str, Path], llama_bin: str, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(nvim_env, LOCAL_COPILOT_LLAMA_SERVER=llama_bin)
    nvim = start_nvim(nvim_bin, manifest, env, setup={
        "debounce_ms": 0, "adaptive_debounce": False, "n_predict": 4,
        "backends": {"tiny": {"kind": "llama.cpp", "url": url, "model": str(models["x"]),
                              "server": {"context_tokens": 2048, "parallel": 1, "restart_backoff_s": 0.2}}},
    })
    try:
        nvim.exec_lua("vim.g.ready = nil; vim.api.nvim_create_autocmd('User', { pattern = 'LocalCopilotBackendReady',"
                      " callback = function(ev) vim.g.ready = ev.data.backend end })")
        assert not healthy(url)
        nvim.command("LocalCopilotBackend tiny")
        wait_for(lambda: nvim.vars.get("ready") == "tiny", timeout=60, what="LocalCopilotBackendReady")
        assert healthy(url)
        assert "starting tiny" in messages(nvim) and "using tiny" in messages(nvim)

        nvim.command(f"edit {tmp_path / 'a.py'}")
        nvim.input("ia = ")
        assert wait_ghost(nvim, lambda t: t == "xxxx") == "xxxx"

        status = nvim.call("LocalCopilotCall", "backend_status")
        assert status["backend"] == "tiny" and status["url"] == url
        assert status["server"]["state"] == "ready"
        pid = status["server"]["pid"]
        if hasattr(os, "sched_getscheduler"):
            # the host's network thread runs as SCHED_BATCH (worker.py); the server it started does not
            assert os.sched_getscheduler(pid) == os.SCHED_OTHER
        nvim.command("LocalCopilotBackend")  # shows it
        assert "backend   tiny (llama.cpp)" in messages(nvim)

        os.kill(pid, signal.SIGKILL)  # the watch loop restarts it
        wait_for(lambda: nvim.call("LocalCopilotCall", "backend_status")["server"].get("pid") not in (pid, None)
                 and healthy(url), timeout=60, what="restarted server")
        nvim.input("<Esc>")
        nvim.input("ob = ")
        assert wait_ghost(nvim, lambda t: t == "xxxx", timeout=30)  # completions resume

        nvim.command("LocalCopilotBackend stop tiny")
        wait_for(lambda: not healthy(url), timeout=30, what="server stopped")
    finally:
        nvim.close()


def test_two_neovims_share_one_server_which_stops_when_the_last_leaves(
    models: dict[str, Path], llama_bin: str, nvim_bin: str, manifest: Path, nvim_env: dict[str, str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    env = dict(nvim_env, LOCAL_COPILOT_LLAMA_SERVER=llama_bin)
    setup = {"n_predict": 4, "backends": {"tiny": {"kind": "llama.cpp", "url": url, "model": str(models["x"]),
                                                     "server": {"context_tokens": 2048, "parallel": 1}}}}
    first = start_nvim(nvim_bin, manifest, env, setup=setup)
    second = start_nvim(nvim_bin, manifest, env, setup=setup)
    try:
        pids = []
        for nvim in (first, second):
            nvim.exec_lua("vim.api.nvim_create_autocmd('User', { pattern = 'LocalCopilotBackendReady',"
                          " callback = function() vim.g.ready = true end })")
            nvim.command("LocalCopilotBackend tiny")
            wait_for(lambda nv=nvim: nv.vars.get("ready"), timeout=60, what="ready")
            pids.append(nvim.call("LocalCopilotCall", "backend_status")["server"]["pid"])
        assert pids[0] == pids[1]  # the second attached to the first one's server
        assert second.call("LocalCopilotCall", "backend_status")["server"]["users"] == 2
        first.command("LocalCopilotBackend restart tiny")
        wait_for(lambda: second.call("LocalCopilotCall", "backend_status")["server"].get("pid") not in (pids[0], None)
                 and healthy(url), timeout=60, what="restarted for both")
        first.close()
        assert healthy(url)  # the other Neovim still uses it
        # the last user leaves: the server stops (keep_alive_s = 0)
        second.exec_lua("vim.schedule(function() vim.cmd('qall!') end)")
    except Exception:
        first.close()
        raise
    finally:
        with contextlib.suppress(Exception):
            second.close()
    wait_for(lambda: not healthy(url), timeout=30, what="server stopped after the last Neovim left")


def test_unknown_backend_names_the_choices(nvim_bin: str, manifest: Path, nvim_env: dict[str, str]) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={})
    try:
        nvim.command("LocalCopilotBackend mystery")
        text = wait_for(lambda: "unknown backend" in messages(nvim) and messages(nvim), what="error message")
        # the built-in entries: config.py's and those the kinds bring (a new kind's adds itself)
        assert {"llama.cpp", "lmstudio", "ollama", "openai", "sglang", "vllm"} <= set(builtin_backends())
        assert "choose one of: auto, " + ", ".join(sorted(builtin_backends())) in text
        assert "Traceback" not in text
        names = lua(nvim, "require('local_copilot.commands').backend_names()")
        assert "auto" in names and set(builtin_backends()) <= set(names)
    finally:
        nvim.close()


VLLM_PYTHON = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"


@pytest.mark.vllm
def test_switch_to_vllm_starts_it_and_completions_come_from_it(
    phrase_server: Any, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path
) -> None:
    if not VLLM_PYTHON.exists():
        pytest.skip("vLLM venv missing: run `make vllm` (make test does it)")
    from local_copilot.devtools.tiny_model import write_hf_dir

    model_dir = write_hf_dir(tmp_path / "tiny-hf", favor="x")
    url = f"http://127.0.0.1:{free_port()}"
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "debounce_ms": 0, "adaptive_debounce": False, "n_predict": 4,
        # completions come from llama.cpp (the phrase model) until vLLM is ready
        "backend": "llama.cpp",
        "backends": {
            # /infill: the phrase model writes PHRASE after the middle marker (see test_editor.py)
            "llama.cpp": {"url": phrase_server.url, "endpoint": "infill"},
            "vllm": {"url": url, "model": "tiny-qwen2-fim", "server": {
                "weights": str(model_dir), "python": str(VLLM_PYTHON), "dtype": "float32",
                "context_tokens": 2048, "max_num_seqs": 4, "startup_timeout_s": 400,
                "env": {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1"},
            }},
        },
    })
    try:
        nvim.exec_lua("vim.api.nvim_create_autocmd('User', { pattern = 'LocalCopilotBackendReady',"
                      " callback = function(ev) vim.g.ready = ev.data.backend end })")
        nvim.command(f"edit {tmp_path / 'a.py'}")
        nvim.command("LocalCopilotBackend vllm")
        nvim.current.buffer[:] = ["def f():", "\t"]
        nvim.command("call cursor(2, 1)")
        nvim.input("A")
        assert wait_ghost(nvim, lambda t: t.startswith("run")), "the previous backend serves meanwhile"
        nvim.input("<Esc>")
        wait_for(lambda: nvim.vars.get("ready") == "vllm", timeout=420, what="vLLM ready")
        nvim.input("ox = ")
        assert wait_ghost(nvim, lambda t: t == "xxxx", timeout=60) == "xxxx"
        assert nvim.call("LocalCopilotCall", "backend_status")["template"] == "qwen"
    finally:
        nvim.close()
