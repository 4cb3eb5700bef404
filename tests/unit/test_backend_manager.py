"""Server management never blocks the host's network thread (issue 24): `:LocalCopilotBackend
stop` waits for the server to exit, and `auto` runs probes; both in a thread, so the loop that
carries completions keeps running."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from local_copilot.config import load_config
from local_copilot.servers import backend_manager
from local_copilot.servers.auto import BackendChoice
from local_copilot.servers.backend_manager import BackendManager


class SlowSupervisor:
    """Stands for a Supervisor whose server takes its time to exit."""

    def __init__(self, release: threading.Event) -> None:
        self.name = "llama.cpp"
        self.release = release

    def close(self, release: bool) -> None:
        pass

    def stop(self) -> bool:
        assert self.release.wait(5)
        return True


async def ticks_while(until: threading.Event, release: threading.Event) -> int:
    """Loop turns while the slow call runs (it ends when `release` is set)."""
    n = 0
    while not until.is_set():
        await asyncio.sleep(0.005)
        n += 1
        if n == 20:
            release.set()
    return n


async def test_stop_waits_for_the_server_in_a_thread() -> None:
    notes: list[str] = []
    done = threading.Event()
    release = threading.Event()
    manager = BackendManager(lambda m, level: (notes.append(m), done.set()), lambda cfg: None, lambda name: None)
    manager.supervisors["llama.cpp"] = SlowSupervisor(release)  # type: ignore[assignment]
    manager.stop("llama.cpp")  # returns at once: the loop goes on while the server stops
    assert await ticks_while(done, release) >= 20
    assert notes == ["local-copilot: stopped llama.cpp"]


async def test_auto_probes_in_a_thread(monkeypatch: Any) -> None:
    release = threading.Event()
    chose = threading.Event()
    loop_thread = threading.current_thread()
    probed_in: list[threading.Thread] = []

    def detect(backends: Any) -> BackendChoice:
        probed_in.append(threading.current_thread())
        assert release.wait(5)
        return BackendChoice(backend="llama.cpp", reason="test")

    monkeypatch.setattr(backend_manager, "detect_backend", detect)
    notes: list[str] = []
    manager = BackendManager(lambda m, level: (notes.append(m), chose.set()), lambda cfg: None, lambda name: None)
    manager.switch(load_config({"backends": {"llama.cpp": {"url": "http://127.0.0.1:9"}}}), "auto")
    assert await ticks_while(chose, release) >= 20
    assert probed_in and probed_in[0] is not loop_thread
    assert notes[0] == "local-copilot: auto chose llama.cpp: test"
    if manager._task is not None:
        manager._task.cancel()


async def test_start_brings_up_a_second_backend_without_making_it_active(monkeypatch: Any, tmp_path: Any) -> None:
    """:LocalCopilotBackend start nes: the next-edit server beside the ghost-text one."""
    from tests.fakes.fake_server import FakeServer

    monkeypatch.setenv("LOCAL_COPILOT_RUNTIME_DIR", str(tmp_path))
    server = FakeServer(lambda path, body: (200, [b'{"status": "ok"}']))
    notes: list[str] = []
    applied: list[Any] = []
    ready: list[str] = []
    manager = BackendManager(lambda m, level: notes.append(m), applied.append, ready.append)
    cfg = load_config({"backends": {"nes": {"kind": "llama.cpp", "url": server.url}}})
    try:
        manager.start(cfg, "nes")
        assert manager._starting is not None
        await manager._starting
    finally:
        server.close()
    assert applied == [] and ready == ["nes"]
    assert notes == [f"local-copilot: nes is up at {server.url} (already running)"]


async def test_the_model_command_on_a_server_that_does_not_answer_says_so_and_changes_nothing() -> None:
    from local_copilot.servers.ports import free_port

    notes: list[tuple[str, str]] = []
    applied: list[Any] = []
    manager = BackendManager(lambda m, level: notes.append((m, level)), applied.append, lambda name: None)
    cfg = load_config({"backends": {"llama.cpp": {"url": f"http://127.0.0.1:{free_port()}", "model": "a"}}})
    manager.set_model(cfg, "b")
    assert manager._task is not None
    await manager._task
    [(message, level)] = notes
    assert level == "error" and message.startswith("local-copilot: cannot list the models of llama.cpp: ")
    assert "cannot reach" in message and applied == []
    # without a model named: which one the entry uses
    notes.clear()
    manager.set_model(cfg, "")
    await manager._task
    assert notes == [("local-copilot: llama.cpp uses model a; :LocalCopilotBackend model NAME sets another", "info")]


async def test_a_switch_takes_effect_over_the_options_in_force(monkeypatch: Any, tmp_path: Any) -> None:
    """:LocalCopilotBackend nes waits on nes's server (minutes when it starts): options setup()
    gives meanwhile (an exclusion) stay in force once the switch takes effect."""
    from tests.fakes.fake_server import FakeServer

    monkeypatch.setenv("LOCAL_COPILOT_RUNTIME_DIR", str(tmp_path))
    server = FakeServer(lambda path, body: (200, [b'{"status": "ok"}']))
    entries = {"backends": {"nes": {"kind": "llama.cpp", "url": server.url, "server": {"recipe": "none"}}}}
    in_force = [load_config(entries)]

    def apply(change: Any) -> None:
        cfg = change(in_force[-1])
        if cfg is not None:
            in_force.append(cfg)

    manager = BackendManager(lambda m, level: None, apply, lambda name: None)
    try:
        manager.switch(in_force[-1], "nes")
        in_force.append(load_config({**entries, "exclude": ["*.internal.py"]}))  # setup() while it waits
        assert manager._task is not None
        await manager._task
        manager.set_model(in_force[-1], "")  # (names the model: changes nothing)
        await manager._task
    finally:
        server.close()
    assert len(in_force) == 3 and in_force[-1].backend == "nes" and in_force[-1].exclude == ["*.internal.py"]
