"""Every surface stops the model server's stream when its buffer or document goes away: a
wiped Neovim buffer (the in-process language server's menu request, `setup({ lsp = true })`)
and a document the client of `local-copilot lsp` closes. Against the real tiny llama-server
(its /metrics count the tokens generated), with the recording proxy counting the requests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from local_copilot.servers.llama_cpp import LlamaServer

from ..fakes.recording_proxy import RecordingProxy
from ..helpers import wait_for
from .test_lsp import fills, generating, metric, processing
from .test_lsp_nvim import INVOKED, REQUEST, TRIGGER_CHARACTER, ask, start
from .test_lsp_protocol import RawClient

pytestmark = pytest.mark.integration

LONG = 3000  # tokens a request asks for: far more than it may generate before it is stopped
REQUEST_CANCELLED = -32800
# nothing but the request's end stops the generation: no token, line or time cap comes first
LONG_OPTIONS = {"n_predict": LONG, "n_predict_first": 0, "max_lines": 1000, "t_max_predict_ms": 60000}


@pytest.fixture()
def upstream(llama_server: LlamaServer) -> LlamaServer:
    """What `proxy` (conftest.py) stands in front of."""
    return llama_server


def test_a_wiped_buffer_closes_its_menu_requests_stream_and_asks_nothing_more(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], llama_server: LlamaServer, proxy: RecordingProxy,
        tmp_path: Path) -> None:
    """`:bwipeout!` while the menu's request streams: the stream is closed at once (the server
    stops generating), the client is answered (nothing to offer), and nothing more is asked
    for the wiped buffer (not the alternatives an invoked request samples after the first)."""
    nv = start(nvim_bin, manifest, nvim_env, proxy.url, tmp_path / "long.py", "def f():\n    \n")
    try:
        nv.exec_lua("require('local_copilot').setup(...)",
                    {"backends": {"llama.cpp": {"url": proxy.url}}, "lsp": True, "warm_up": False,
                     "auto_trigger": False, **LONG_OPTIONS})
        ask(nv, TRIGGER_CHARACTER, 0, 8)  # the server is probed and warm
        wait_for(lambda: not processing(llama_server.url), what="the server idle")
        before, asked = metric(llama_server.url, "tokens_predicted_total"), len(fills(proxy))
        nv.exec_lua(REQUEST, INVOKED, 1, 4, "textDocument/completion")
        wait_for(lambda: generating(llama_server.url), interval=0.005, what="the server generating")
        nv.command("bwipeout!")
        answered = wait_for(lambda: nv.exec_lua("return _G.lsp_answer"), what="the request answered")
        assert answered.get("err") is None and answered["result"] is None, answered
        wait_for(lambda: not processing(llama_server.url), what="the generation stopped")
        generated = metric(llama_server.url, "tokens_predicted_total") - before
        assert 0 < generated < LONG / 2, generated
        assert nv.call("LocalCopilotCall", "debug_state")["tasks"] == 0
        assert len(fills(proxy)) == asked + 1, fills(proxy)[asked:]  # the one request, nothing after it
    finally:
        nv.close()


def test_a_closed_document_closes_its_requests_stream_and_asks_nothing_more(
        llama_server: LlamaServer, proxy: RecordingProxy, tmp_path: Path) -> None:
    client = RawClient(tmp_path)
    try:
        client.initialize({"backends": {"llama.cpp": {"url": proxy.url}}, **LONG_OPTIONS}, tmp_path)
        uri = (tmp_path / "long.py").as_uri()
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                "text": "def f():\n    \n"}})
        client.answer(client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                                 "position": {"line": 0, "character": 8}}))
        wait_for(lambda: not processing(llama_server.url), what="the server idle")
        before, asked = metric(llama_server.url, "tokens_predicted_total"), len(fills(proxy))
        rid = client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                         "position": {"line": 1, "character": 4},
                                                         "context": {"triggerKind": INVOKED}})
        wait_for(lambda: generating(llama_server.url), interval=0.005, what="the server generating")
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        assert client.error(rid)["code"] == REQUEST_CANCELLED
        wait_for(lambda: not processing(llama_server.url), what="the generation stopped")
        generated = metric(llama_server.url, "tokens_predicted_total") - before
        assert 0 < generated < LONG / 2, generated
        assert len(fills(proxy)) == asked + 1, fills(proxy)[asked:]
        client.answer(client.request("shutdown"))
        client.notify("exit", None)
        assert client.exit_code() == 0
    finally:
        client.close()
