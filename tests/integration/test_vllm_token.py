"""A token on the vLLM path: a real vLLM (CPU build, `make vllm`) started with `--api-key`,
serving the deterministic tiny HF model, as tests/conftest.py's `vllm_server` starts one.
vLLM refuses every /v1 request without the key, its readiness path (`/v1/models`) included."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.errors import TokenRefused
from local_copilot.health.report import collect, render_text
from local_copilot.instruct.chat import chat_backend
from local_copilot.servers.backend_manager import _healthy
from local_copilot.servers.llama_cpp import LlamaServer
from local_copilot.servers.ports import free_port
from local_copilot.transport.access import async_client

from ..conftest import VLLM_PYTHON
from ..fakes.editor import RecordingEditor
from ..unit.test_engine import snap, wait_until

pytestmark = pytest.mark.integration

KEY = "sk-vllm-92d4e1"


@pytest.fixture(scope="module")
def keyed_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not VLLM_PYTHON.exists():
        pytest.skip("vLLM venv missing: run `make vllm` (make test does it)")
    from local_copilot.devtools.tiny_model import write_hf_dir

    d = tmp_path_factory.mktemp("vllm-key")
    model = write_hf_dir(d / "tiny-hf", favor="x")
    port = free_port()
    argv = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--served-model-name", "tiny-qwen2-fim", "--max-model-len", "2048", "--dtype", "float32",
            "--host", "127.0.0.1", "--port", str(port), "--max-num-seqs", "4", "--api-key", KEY]
    env_keys = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    old = {k: os.environ.get(k) for k in env_keys}
    os.environ.update(env_keys)
    server = LlamaServer(argv, port=port, log_file=d / "vllm.log")  # /health needs no key
    try:
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


def options(url: str) -> dict[str, object]:
    return {"backend": "vllm", "n_predict": 4,
            "backends": {"vllm": {"url": url, "api_key_env": "VLLM_TOKEN", "timeout_ms": 60000}}}


async def test_the_token_reaches_vllm_on_every_path_and_a_wrong_one_is_named(
        keyed_vllm: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VLLM_TOKEN", KEY)
    cfg = load_config(options(keyed_vllm))
    entry = cfg.backends["vllm"]
    # the switcher's readiness check asks /v1/models, which vLLM refuses without the key
    assert await _healthy(entry.url, entry.kind, entry)
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(cfg)
    try:
        engine.ghost.submit(snap(1))
        await wait_until(lambda: any(p.final for p in editor.plans) or bool(editor.notes), timeout=60)
        assert not editor.notes and editor.final[0].startswith("x"), (editor.notes, editor.final)
    finally:
        await engine.close()
    async with async_client([entry], timeout=60.0) as client:
        chat = chat_backend("vllm", entry, client, timeout_s=60)
        exchange = await chat.chat([{"role": "user", "content": "x"}], 3, 0.0)
        assert "".join([c.text async for c in exchange.chunks()]).startswith("x")
        chat.close()
    report = render_text(await collect(options(keyed_vllm), editor=False, probe_timeout=60))
    assert "FIM probe" in report and "FIM probe failed" not in report and KEY not in report, report
    # a wrong key: one line that names the variable, never the key
    monkeypatch.setenv("VLLM_TOKEN", "sk-wrong-0000")
    assert not await _healthy(entry.url, entry.kind, entry)
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(cfg)
    try:
        engine.ghost.submit(snap(1))
        await wait_until(lambda: bool(editor.notes), timeout=60)
        refused = await engine.pipeline.complete(snap(2))  # what the completion says of it
    finally:
        await engine.close()
    assert editor.notes[0][0].startswith("local-copilot: vllm: the server refused the token in $VLLM_TOKEN (401"), \
        editor.notes
    assert "sk-wrong-0000" not in editor.notes[0][0]
    assert refused.stop == "error" and isinstance(refused.error, TokenRefused)
