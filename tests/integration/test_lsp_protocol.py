"""`local-copilot lsp` driven byte for byte by a raw stdio client (a subprocess written
Content-Length frames, well-formed or not), with requests of every shape the libraries' clients
never send: each gets its JSON-RPC error within a bound (TIMEOUT), the server goes on answering,
and its exit code follows the protocol (0 after shutdown, 1 without). RawClient serves the other
raw-client tests too (test_line_ends.py, test_buffer_gone.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local_copilot.servers.llama_cpp import free_port

from ..helpers import TIMEOUT, wait_for
from .test_lsp import SERVER, server_env

pytestmark = pytest.mark.integration

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
SERVER_NOT_INITIALIZED = -32002


class RawClient:
    """The language server as a subprocess: `send` writes one frame with the body as given;
    what the server writes is read back frame by frame."""

    def __init__(self, tmp_path: Path) -> None:
        self._err = (tmp_path / "lsp-stderr.log").open("wb")
        self.proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     env={**os.environ, **server_env(tmp_path)})
        self.messages: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._ids = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while (line := out.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if not line or length is None:
                return
            with self._lock:
                self.messages.append(json.loads(out.read(length)))

    def send(self, message: dict[str, Any] | bytes) -> None:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.proc.stdin.flush()

    def request(self, method: str, params: Any = None, **message: Any) -> int:
        self._ids += 1
        self.send({"jsonrpc": "2.0", "id": self._ids, "method": method, **({} if params is None else
                                                                          {"params": params}), **message})
        return self._ids

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def answer(self, rid: int | None, *, index: int = 0, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The answer to request `rid` (the `index`th answer with id null for None)."""
        def found() -> dict[str, Any] | None:
            with self._lock:
                got = [m for m in self.messages if "method" not in m and m.get("id") == rid]
            return got[index] if len(got) > index else None

        return wait_for(found, timeout=timeout, what=f"the answer to {rid}")

    def error(self, rid: int | None, **kw: Any) -> dict[str, Any]:
        got = self.answer(rid, **kw)
        assert "error" in got, got
        return dict(got["error"])

    def notifications(self, method: str) -> list[Any]:
        with self._lock:
            return [m["params"] for m in self.messages if m.get("method") == method]

    def initialize(self, init: dict[str, Any], root: Path) -> None:
        rid = self.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {},
                                          "initializationOptions": init})
        assert "result" in self.answer(rid, timeout=60)
        self.notify("initialized", {})

    def exit_code(self) -> int:
        try:
            return self.proc.wait(TIMEOUT)
        finally:
            self._err.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


@pytest.fixture()
def raw_client(tmp_path: Path) -> Iterator[Any]:
    made: list[RawClient] = []

    def make() -> RawClient:
        made.append(RawClient(tmp_path))
        return made[-1]

    yield make
    for client in made:
        client.close()


def test_every_request_gets_an_answer_whatever_its_shape(raw_client: Any, tmp_path: Path) -> None:
    client = raw_client()
    early = client.request("textDocument/completion", {"textDocument": {"uri": "file:///x.py"},
                                                       "position": {"line": 0, "character": 0}})
    assert client.error(early)["code"] == SERVER_NOT_INITIALIZED
    client.initialize({"backends": {"llama.cpp": {"url": f"http://127.0.0.1:{free_port()}"}}}, tmp_path)
    uri = (tmp_path / "job.py").as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": "def f():\n    \n"}})
    doc = {"textDocument": {"uri": uri}}

    def bad_params(method: str, params: Any, says: str) -> None:
        got = client.error(client.request(method, params))
        assert got["code"] == INVALID_PARAMS and says in got["message"], got

    bad_params("textDocument/completion", {**doc, "position": {"line": -1, "character": 0}}, "Position.line")
    bad_params("textDocument/completion", {**doc, "position": {"line": 2**40, "character": 0}}, "Position.line")
    bad_params("textDocument/completion", doc, "position")
    bad_params("textDocument/inlineCompletion", {**doc, "position": {"line": 0, "character": 0}}, "context")
    bad_params("textDocument/completion", [uri, 0, 0], "position")

    # no method; no jsonrpc: invalid requests, answered by their ids
    client.send({"jsonrpc": "2.0", "id": 101, "params": doc})
    assert client.error(101)["code"] == INVALID_REQUEST
    client.send({"id": 102, "method": "textDocument/completion", "params": {**doc, "position": {"line": 0,
                                                                                                "character": 0}}})
    assert client.error(102)["code"] == INVALID_REQUEST
    # not JSON, and no UTF-8: parse errors (their ids cannot be read: null)
    client.send(b'{"jsonrpc": "2.0", "id": 103, "method": ')
    assert client.error(None)["code"] == PARSE_ERROR
    client.send(b'{"jsonrpc": "2.0", "id": 104, "method": "\xff"}')
    assert client.error(None, index=1)["code"] == PARSE_ERROR
    assert client.error(client.request("no/such/method", {}))["code"] == METHOD_NOT_FOUND

    # the server goes on answering
    ok = client.answer(client.request("textDocument/completion", {**doc, "position": {"line": 1, "character": 4}}))
    assert ok["result"]["items"] == [], ok

    assert client.answer(client.request("shutdown"))["result"] is None
    after = client.error(client.request("textDocument/completion", {**doc, "position": {"line": 1, "character": 4}}))
    assert after["code"] == INVALID_REQUEST and "shut down" in after["message"], after
    client.notify("exit", None)
    assert client.exit_code() == 0


def test_exit_without_shutdown_is_exit_code_1(raw_client: Any, tmp_path: Path) -> None:
    client = raw_client()
    client.initialize({}, tmp_path)
    client.notify("exit", None)
    assert client.exit_code() == 1


def test_a_notification_that_cannot_be_read_is_said_in_the_clients_log(raw_client: Any, tmp_path: Path) -> None:
    client = raw_client()
    client.initialize({}, tmp_path)
    client.notify("textDocument/didChange", {"textDocument": {"uri": "file:///x.py", "version": 2},
                                             "contentChanges": [{"range": {"start": {"line": -1, "character": 0}}}]})
    said = wait_for(lambda: client.notifications("window/logMessage"), what="the log message")
    assert "textDocument/didChange" in said[0]["message"], said
    client.answer(client.request("shutdown"))
    client.notify("exit", None)
    assert client.exit_code() == 0
