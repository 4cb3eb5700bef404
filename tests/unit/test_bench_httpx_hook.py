"""`make bench`'s `httpx` profile: bench/hooks on the host's PYTHONPATH sends every backend's
completions through httpx, and nothing of it is in the package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import httpx
from local_copilot.backends.llama_cpp import LlamaCppBackend
from local_copilot.config import load_config
from local_copilot.backends.chat import ChatBackend
cfg = load_config({}).backends["llama.cpp"]
client = httpx.AsyncClient()
fim, chat = LlamaCppBackend("llama.cpp", cfg, client), ChatBackend("chat", cfg, client)
# a quick answer is read without the event loop only by the hand-written client: httpx's
# post_now sends nothing (the exchange then sends through post())
print(type(fim.streams).__module__, type(chat.streams).__module__, getattr(fim.streams, "client", None) is client,
      type(fim.streams).post_now.__qualname__)
"""


def _probe(pythonpath: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run([sys.executable, "-c", PROBE, str(ROOT / "python")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_hook_swaps_every_backends_stream_client_for_httpx() -> None:
    assert _probe(str(ROOT / "bench" / "hooks")) == ["httpx_streams", "httpx_streams", "True", "HttpxStreams.post_now"]


def test_without_the_hook_the_streams_are_the_hand_written_client() -> None:
    assert _probe(None) == ["local_copilot.transport.http_stream", "local_copilot.transport.http_stream", "False",
                            "StreamClient.post_now"]


def test_the_httpx_streams_send_nothing_without_the_event_loop() -> None:
    sys.path.insert(0, str(ROOT / "bench" / "hooks"))
    try:
        from httpx_streams import HttpxStreams  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(ROOT / "bench" / "hooks"))
    assert HttpxStreams(None).post_now("http://127.0.0.1:9/completion", b"{}", {}, 0.016, whole=True) is None
