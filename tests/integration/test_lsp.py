"""`local-copilot lsp` driven by real language clients nobody here wrote, against the real tiny
llama-server:

- Neovim's own LSP client (`vim.lsp.start` with the server as `cmd`, `vim.lsp.buf_request_sync`,
  `client:request`/`cancel_request`, and `vim.lsp.completion` inserting an item);
- Microsoft's vscode-jsonrpc + vscode-languageserver-protocol (VS Code's protocol layer), run
  by node from lsp_client.cjs, installed from npm into ~/.cache/local-copilot/npm.

What a user would see: items with the phrase model's text, typing through that keeps them
valid without asking the server again, a cancelled request whose generation stops (the server's
/metrics), a private file that sends nothing (the recording proxy's requests), a bad option that
is one message, and a backend that the server starts itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_copilot.devtools.tiny_model import write_gguf
from local_copilot.servers.directories import runtime_dir
from local_copilot.servers.llama_cpp import LlamaServer, free_port
from local_copilot.servers.registry import ServerFiles, pid_alive

from ..conftest import PHRASE
from ..fakes.recording_proxy import RecordingProxy
from ..helpers import TIMEOUT, wait_for
from .nvim_session import REPO, attach_child

pytestmark = pytest.mark.integration

NPM_DIR = Path.home() / ".cache" / "local-copilot" / "npm"
NPM_PACKAGES = ("vscode-jsonrpc@10.0.0", "vscode-languageserver-protocol@3.18.5")
CLIENT_JS = Path(__file__).with_name("lsp_client.cjs")
SERVER = [sys.executable, "-m", "local_copilot.cli.main", "lsp"]

SOURCE = "import os\n\ndef main():\n\t\n\treturn 0\n"
CURSOR = {"line": 3, "character": 1}  # after the tab of the empty body line
INVOKED, TRIGGER_CHARACTER, INCOMPLETE = 1, 2, 3
REQUEST_CANCELLED = -32800
LONG = 3000  # tokens a cancelled request asks for: far more than it may generate


def server_env(tmp_path: Path) -> dict[str, str]:
    """The language server's environment: this worktree's package, and the log, runtime and
    config directories of this test only."""
    return {"PYTHONPATH": str(REPO / "python"), "LOCAL_COPILOT_LOG_DIR": str(tmp_path / "log"),
            "LOCAL_COPILOT_RUNTIME_DIR": str(tmp_path / "run"), "XDG_CONFIG_HOME": str(tmp_path / "config")}


def options(url: str, **more: Any) -> dict[str, Any]:
    # the phrase model is asked through /infill, as the editor's tests ask it
    return {"backends": {"llama.cpp": {"url": url, "endpoint": "infill"}}, **more}


def metric(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5, trust_env=False).text
    found = re.search(rf"^llamacpp:{name}\s+([0-9.eE+-]+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def processing(url: str) -> bool:
    return any(s.get("is_processing") for s in httpx.get(url + "/slots", timeout=5, trust_env=False).json())


def generating(url: str) -> bool:
    """A slot has written tokens of its answer (past evaluating the prompt)."""
    for slot in httpx.get(url + "/slots", timeout=5, trust_env=False).json():
        nxt = slot.get("next_token")
        decoded = (nxt[0] if isinstance(nxt, list) else nxt or {}).get("n_decoded", 0)
        if slot.get("is_processing") and decoded > 0:
            return True
    return False


def fills(proxy: RecordingProxy) -> list[dict[str, Any]]:
    """The completion requests the model server got (probes carry no text)."""
    return [body for path, body in proxy.requests if path in ("/infill", "/completion")]


# ------------------------------------------------------------------------------------ node


@pytest.fixture(scope="session")
def node_modules() -> str:
    """vscode-jsonrpc and vscode-languageserver-protocol from npm, installed once."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("needs node and npm (the independent language client)")
    modules = NPM_DIR / "node_modules"
    if not all((modules / p.rsplit("@", 1)[0] / "package.json").is_file() for p in NPM_PACKAGES):
        NPM_DIR.mkdir(parents=True, exist_ok=True)
        res = subprocess.run([npm, "install", "--prefix", str(NPM_DIR), "--save-exact", "--no-audit", "--no-fund",
                              *NPM_PACKAGES], capture_output=True, text=True, timeout=300, check=False)
        if res.returncode != 0:
            pytest.fail(f"npm install failed: {res.stderr[-2000:]}")
    return str(modules)


class NodeClient:
    """lsp_client.cjs: one JSON command a line in, one JSON event a line out."""

    def __init__(self, modules: str, env: dict[str, str]) -> None:
        node = shutil.which("node")
        assert node is not None
        self.proc = subprocess.Popen([node, str(CLIENT_JS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env={**os.environ, "NODE_PATH": modules})
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._ids = 0
        threading.Thread(target=self._read, daemon=True).start()
        self._send({"op": "start", "cmd": SERVER, "env": env})

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.events.append(json.loads(line))

    def _send(self, cmd: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def start_request(self, method: str, params: Any) -> int:
        self._ids += 1
        self._send({"op": "request", "id": self._ids, "method": method, "params": params})
        return self._ids

    def response(self, rid: int, timeout: float = TIMEOUT) -> dict[str, Any]:
        def answered() -> dict[str, Any] | None:
            with self._lock:
                return next((e for e in self.events if e.get("id") == rid), None)

        return wait_for(answered, timeout=timeout, what=f"the answer to request {rid}")

    def request(self, method: str, params: Any, timeout: float = TIMEOUT) -> Any:
        answer = self.response(self.start_request(method, params), timeout)
        assert "error" not in answer, answer
        return answer["result"]

    def cancel(self, rid: int) -> None:
        self._send({"op": "cancel", "id": rid})

    def notify(self, method: str, params: Any) -> None:
        self._send({"op": "notify", "method": method, "params": params})

    def notifications(self, method: str) -> list[Any]:
        with self._lock:
            return [e["params"] for e in self.events if e.get("notification") == method]

    def initialize(self, init: Any, root: Path) -> dict[str, Any]:
        # the capabilities VS Code's client declares for completion items
        caps = {"textDocument": {"completion": {"completionItem": {
            "snippetSupport": True, "insertTextModeSupport": {"valueSet": [1, 2]}}, "contextSupport": True},
            "inlineCompletion": {}}}
        result = self.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(),
                                             "capabilities": caps, "initializationOptions": init}, timeout=60)
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: str, language: str = "python") -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": language, "version": 1,
                                                              "text": text}})
        return uri

    def complete(self, uri: str, position: dict[str, int], kind: int = INCOMPLETE) -> Any:
        return self.request("textDocument/completion", {"textDocument": {"uri": uri}, "position": position,
                                                        "context": {"triggerKind": kind}})

    def close(self) -> None:
        self._send({"op": "exit"})
        exited = wait_for(lambda: next((e for e in list(self.events) if "exited" in e), None), what="the server's exit")
        assert exited["exited"] == 0, exited
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(TIMEOUT)


@pytest.fixture()
def node_client(node_modules: str, tmp_path: Path) -> Iterator[Any]:
    made: list[NodeClient] = []

    def make() -> NodeClient:
        made.append(NodeClient(node_modules, server_env(tmp_path)))
        return made[-1]

    yield make
    for client in made:
        if client.proc.poll() is None:
            client.proc.kill()
            client.proc.wait()


def test_vscode_client_items_typing_through_full_sync_and_inline(node_client: Any, proxy: RecordingProxy,
                                                                 tmp_path: Path) -> None:
    client = node_client()
    caps = client.initialize(options(proxy.url), tmp_path)["capabilities"]
    assert caps["completionProvider"] is not None and caps["inlineCompletionProvider"] is not None
    assert caps["textDocumentSync"]["change"] == 2  # incremental; full changes are taken too
    uri = client.open(tmp_path / "job.py", SOURCE)

    got = client.complete(uri, CURSOR, INVOKED)
    assert got["isIncomplete"] is True
    first = got["items"][0]
    assert 1 <= len(got["items"]) <= 3 and first["label"] == "run(a, b)"
    # a snippet client adds the cursor line's tab to the later line: it is given without it
    assert first["textEdit"] == {"range": {"start": CURSOR, "end": CURSOR}, "newText": "run(a, b)\nok"}
    assert first["insertTextFormat"] == 2 and first["insertTextMode"] == 2
    assert first["documentation"] == {"kind": "markdown", "value": f"```python\n{PHRASE}\n```"}
    sent = fills(proxy)
    assert sent[0]["input_prefix"] == "import os\n\ndef main():\n" and sent[0]["input_suffix"] == "\n\treturn 0"
    # invoked: alternatives were asked for, sampled as ghost text's next() asks
    assert any(body.get("temperature") == 0.8 for body in sent[1:])

    # the user types the first characters of the item (an incremental change): the next request
    # is answered with the rest, and the server is not asked again
    asked = len(fills(proxy))
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
        {"range": {"start": CURSOR, "end": CURSOR}, "text": "ru"}]})
    typed = client.complete(uri, {"line": 3, "character": 3})
    assert [(i["label"], i["textEdit"]["newText"]) for i in typed["items"]] == [("n(a, b)", "n(a, b)\nok")]
    assert len(fills(proxy)) == asked

    # a full change (no range): the server sees the new text
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3}, "contentChanges": [
        {"text": "import os\n\ndef main():\n\tx = 1\n\t\n\treturn 0\n"}]})
    after = client.complete(uri, {"line": 4, "character": 1})
    assert after["items"][0]["label"] == "run(a, b)"
    assert fills(proxy)[-1]["input_prefix"] == "import os\n\ndef main():\n\tx = 1\n"

    inline = client.request("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": 4, "character": 1}, "context": {"triggerKind": 2}})
    assert inline["items"] == [{"insertText": PHRASE, "range": {"start": {"line": 4, "character": 1},
                                                                "end": {"line": 4, "character": 1}}}]
    client.close()


def test_vscode_client_the_document_left_is_context_for_the_next(node_client: Any, proxy: RecordingProxy,
                                                                 tmp_path: Path) -> None:
    """As the editor sends a buffer it leaves: the text around where the user was asked in one
    document goes with the requests in another (llama.cpp's input_extra), never a private one."""
    client = node_client()
    client.initialize(options(proxy.url), tmp_path)
    helpers = "".join(f"def helper_{i}(value):\n    return value * {i} + {i}\n\n" for i in range(12))
    left = client.open(tmp_path / "helpers.py", helpers)
    secret = client.open(tmp_path / "secrets.py", helpers.replace("helper", "hidden"))
    job = client.open(tmp_path / "job.py", SOURCE)
    client.complete(left, {"line": 6, "character": 0})
    client.complete(secret, {"line": 6, "character": 0})  # refused (secrets.*): asked, nothing sent
    client.complete(job, CURSOR)
    extra = fills(proxy)[-1]["input_extra"]
    assert [chunk["filename"] for chunk in extra] == [str(tmp_path / "helpers.py")]
    assert "def helper_2(value):" in extra[0]["text"]
    client.close()


def test_vscode_client_cancel_stops_the_servers_generation(node_client: Any, llama_server: LlamaServer,
                                                           tmp_path: Path) -> None:
    client = node_client()
    client.initialize(options(llama_server.url, n_predict=LONG), tmp_path)
    uri = client.open(tmp_path / "long.py", "def f():\n    ")
    client.complete(uri, {"line": 0, "character": 8})  # the server is probed and warm
    wait_for(lambda: not processing(llama_server.url), what="the server idle")
    before = metric(llama_server.url, "tokens_predicted_total")
    rid = client.start_request("textDocument/completion", {"textDocument": {"uri": uri},
                                                           "position": {"line": 1, "character": 4}})
    wait_for(lambda: generating(llama_server.url), interval=0.005, what="the server generating")
    client.cancel(rid)
    assert client.response(rid)["error"]["code"] == REQUEST_CANCELLED
    wait_for(lambda: not processing(llama_server.url), what="the generation stopped")
    generated = metric(llama_server.url, "tokens_predicted_total") - before
    assert 0 < generated < LONG / 2, generated
    client.close()


def test_vscode_client_private_files_send_nothing(node_client: Any, proxy: RecordingProxy, tmp_path: Path) -> None:
    client = node_client()
    client.initialize(options(proxy.url), tmp_path)
    secret = client.open(tmp_path / ".env", "API_URL=https://example.com\n", "sh")
    key = "-----BEGIN RSA PRIVATE KEY-----"
    keyed = client.open(tmp_path / "deploy.py", f'KEY = """\n{key}\n"""\n\n')
    assert client.complete(secret, {"line": 1, "character": 0}, INVOKED)["items"] == []
    assert client.complete(keyed, {"line": 4, "character": 0}, INVOKED)["items"] == []
    assert fills(proxy) == []
    assert not any("API_URL" in json.dumps(body) or key in json.dumps(body) for _, body in proxy.requests)
    said = [p["message"] for p in client.notifications("window/logMessage")]
    assert any(".env is private" in m for m in said) and any("deploy.py is private" in m for m in said), said
    client.close()


def test_vscode_client_bad_options_are_one_message_and_new_settings_fix_them(
        node_client: Any, proxy: RecordingProxy, tmp_path: Path) -> None:
    client = node_client()
    client.initialize({**options(proxy.url), "n_predict": 0}, tmp_path)
    uri = client.open(tmp_path / "job.py", SOURCE)
    assert client.complete(uri, CURSOR) is None  # still running: answering, with nothing
    shown = client.notifications("window/showMessage")
    assert shown == [{"type": 1, "message": "local-copilot: bad option: Expected `int` >= 1 - at `$.n_predict`"}]
    client.notify("workspace/didChangeConfiguration", {"settings": {"local_copilot": options(proxy.url)}})
    assert client.complete(uri, CURSOR)["items"][0]["label"] == "run(a, b)"
    client.notify("workspace/didChangeConfiguration", {"settings": {}})  # as eglot sends on connecting
    assert client.complete(uri, CURSOR)["items"][0]["label"] == "run(a, b)"
    assert len(client.notifications("window/showMessage")) == 1
    client.close()


def options_file(tmp_path: Path, text: str) -> Path:
    """The options file the server reads by itself (config.toml in its user config dir)."""
    path = tmp_path / "config" / "local-copilot" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


INTERNAL = "def internal():\n\t\n\treturn 'internal-only'\n"


def test_vscode_client_partial_settings_go_over_the_options_in_force(
        node_client: Any, proxy: RecordingProxy, tmp_path: Path) -> None:
    """Settings that name some options (Neovim's client and eglot send theirs at connect) change
    those: the backend of the initializationOptions stays, and so does every exclusion, from
    the options file, the initializationOptions and earlier settings alike."""
    options_file(tmp_path, 'exclude = ["*.filed.py"]\n')
    client = node_client()
    client.initialize(options(proxy.url, exclude=["*.internal.py"]), tmp_path)
    private = [client.open(tmp_path / name, INTERNAL) for name in ("keys.internal.py", "keys.filed.py",
                                                                   "keys.draft.py")]
    job = client.open(tmp_path / "job.py", SOURCE)
    for settings in ({"local_copilot": {"n_predict": 64, "backends": {"llama.cpp": {"timeout_ms": 20000}}}},
                     {"local_copilot": {"n_predict": 32}},  # as the finding's client sent them
                     {"n_predict": 48, "exclude": ["*.draft.py"]}):  # exclusions add up
        client.notify("workspace/didChangeConfiguration", {"settings": settings})
        asked = len(fills(proxy))
        assert client.complete(job, CURSOR, INVOKED)["items"][0]["label"] == "run(a, b)"
        assert len(fills(proxy)) > asked  # still the initializationOptions' server
        for uri in private[:2]:
            assert client.complete(uri, {"line": 1, "character": 1}, INVOKED)["items"] == []
    assert client.complete(private[2], {"line": 1, "character": 1}, INVOKED)["items"] == []
    assert fills(proxy) and not any("internal-only" in json.dumps(body) for _, body in proxy.requests)
    assert client.notifications("window/showMessage") == []
    client.close()


def test_vscode_client_a_malformed_options_file_is_one_message_and_the_clients_options_answer(
        node_client: Any, proxy: RecordingProxy, tmp_path: Path) -> None:
    path = options_file(tmp_path, "[backends\n")
    client = node_client()
    caps = client.initialize(options(proxy.url), tmp_path)["capabilities"]
    assert caps["completionProvider"] is not None
    uri = client.open(tmp_path / "job.py", SOURCE)
    assert client.complete(uri, CURSOR)["items"][0]["label"] == "run(a, b)"
    [shown] = client.notifications("window/showMessage")
    assert shown["type"] == 1 and shown["message"].startswith(f"local-copilot: config file {path} is not valid TOML")
    assert "line 1" in shown["message"] and "using the client's options" in shown["message"], shown
    client.close()


def test_vscode_client_a_server_that_is_down_is_one_message_and_no_items(node_client: Any, tmp_path: Path) -> None:
    client = node_client()
    client.initialize({"backends": {"llama.cpp": {"url": f"http://127.0.0.1:{free_port()}"}}}, tmp_path)
    uri = client.open(tmp_path / "job.py", SOURCE)
    for _ in range(3):
        assert client.complete(uri, CURSOR, INVOKED)["items"] == []
    shown = client.notifications("window/showMessage")
    assert len(shown) == 1 and shown[0]["type"] == 2 and "cannot reach" in shown[0]["message"], shown
    client.close()


def test_start_true_starts_and_supervises_the_backend_and_leaves_it_on_exit(node_client: Any, llama_bin: str,
                                                             tmp_path: Path) -> None:
    model = write_gguf(tmp_path / "phrase.gguf", phrase=PHRASE)
    port = free_port()
    client = node_client()
    client.initialize({"start": True, "backends": {"llama.cpp": {
        "url": f"http://127.0.0.1:{port}", "model": str(model), "endpoint": "infill",
        "server": {"context_tokens": 2048, "parallel": 1, "keep_alive_s": 0}}}}, tmp_path)
    uri = client.open(tmp_path / "job.py", SOURCE)

    def items() -> list[Any]:
        return client.complete(uri, CURSOR)["items"]

    assert wait_for(items, timeout=120, what="items from the started server")[0]["label"] == "run(a, b)"
    files = ServerFiles(runtime_dir(server_env(tmp_path)), "llama.cpp", port)
    state = files.read_state()
    assert state is not None and len(files.users()) == 1  # started here, this server its one user
    first = int(state["pid"])
    assert pid_alive(first)

    # supervised: once it is said to be up (its watch has begun), killed, it is restarted (said
    # from the supervisor's thread), and items come again
    wait_for(lambda: any(" is up at " in m["message"] for m in client.notifications("window/showMessage")),
             what="the server said to be up")
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: any("restarting" in m["message"] for m in client.notifications("window/showMessage")),
             timeout=30, what="the restart said")

    def restarted() -> int:
        state = files.read_state()
        pid = int(state["pid"]) if state else 0
        return pid if pid != first and pid_alive(pid) else 0

    pid = wait_for(restarted, timeout=60, what="a new server")
    assert wait_for(items, timeout=120, what="items from the restarted server")[0]["label"] == "run(a, b)"
    client.close()  # the last user leaves: the server stops
    wait_for(lambda: not pid_alive(pid), timeout=30, what="the started server stopped")


# ------------------------------------------------------------------------------------ Neovim


START = """
local cmd, env, init, root = ...
return vim.lsp.start({ name = 'local_copilot_lsp', cmd = cmd, cmd_env = env, init_options = init, root_dir = root })
"""

REQUEST = """
local kind, line, character = ...
local client = vim.lsp.get_clients({ name = 'local_copilot_lsp' })[1]
local params = { textDocument = vim.lsp.util.make_text_document_params(0),
                 position = { line = line, character = character }, context = { triggerKind = kind } }
local res = vim.lsp.buf_request_sync(0, 'textDocument/completion', params, 20000)
local r = res and res[client.id]
if not r then return { timeout = true } end
if r.err then return { err = r.err.message } end
return r.result
"""


@pytest.fixture()
def neovim(nvim_bin: str, tmp_path: Path) -> Iterator[Any]:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CONFIG_HOME=str(tmp_path / "config"))
    nv = attach_child([nvim_bin, "--clean", "--embed", "--headless", "-n"], env)
    yield nv
    nv.close()


def lsp_start(nv: Any, tmp_path: Path, path: Path, text: str, init: dict[str, Any]) -> int:
    path.write_text(text)
    nv.command(f"edit {path}")
    cid = nv.exec_lua(START, SERVER, server_env(tmp_path), init, str(tmp_path))
    wait_for(lambda: nv.exec_lua("local c = vim.lsp.get_client_by_id(...); return c ~= nil and c.initialized", cid),
             timeout=60, what="the client initialized")
    return int(cid)


def test_neovim_client_items_typing_through_and_accepting_with_vim_lsp_completion(
        neovim: Any, proxy: RecordingProxy, tmp_path: Path) -> None:
    nv = neovim
    cid = lsp_start(nv, tmp_path, tmp_path / "job.py", SOURCE, options(proxy.url))
    # where a client opens the menu by itself (as the in-process server declares them)
    caps = nv.exec_lua("return vim.lsp.get_client_by_id(...).server_capabilities.completionProvider", cid)
    assert caps["triggerCharacters"] == ["@", ".", "(", "[", ":", " "], caps
    # (the cursor after the tab, as in Insert mode: Normal mode has no column past the tab)
    got = nv.exec_lua(REQUEST, INVOKED, 3, 1)
    assert got["isIncomplete"] is True and got["items"][0]["label"] == "run(a, b)", got
    assert got["items"][0]["textEdit"]["newText"] == "run(a, b)\nok", got

    # typing "ru" (Neovim sends the change itself, incrementally): the rest, nothing asked
    asked = len(fills(proxy))
    nv.api.buf_set_text(0, 3, 1, 3, 1, ["ru"])
    typed = nv.exec_lua(REQUEST, INCOMPLETE, 3, 3)
    assert [(i["label"], i["textEdit"]["newText"]) for i in typed["items"]] == [("n(a, b)", "n(a, b)\nok")]
    assert len(fills(proxy)) == asked

    # accepted through Neovim's completion: the whole suggestion, its later line at the cursor
    # line's indentation
    nv.command("set completeopt=menuone,noselect")
    nv.exec_lua("vim.lsp.completion.enable(true, ..., 0, { autotrigger = false })", cid)
    nv.api.win_set_cursor(0, [4, 0])
    nv.input("A")  # the end of "\tru"
    wait_for(lambda: nv.api.get_mode()["mode"] == "i", what="Insert mode")
    nv.exec_lua("vim.lsp.completion.get()")
    menu = wait_for(lambda: nv.funcs.complete_info(["items"])["items"], what="the completion menu")
    # invoked: the rest first, then what sampling wrote (the phrase model writes its phrase)
    assert menu[0]["abbr"] == "n(a, b)" and len(menu) <= 3, menu
    nv.input("<C-n><C-y>")
    wait_for(lambda: nv.current.buffer[:] == ["import os", "", "def main():", "\trun(a, b)", "\tok", "\treturn 0"],
             what=f"the item inserted; buffer: {nv.current.buffer[:]}")


def test_neovim_client_cancel_stops_the_servers_generation(neovim: Any, llama_server: LlamaServer,
                                                           tmp_path: Path) -> None:
    nv = neovim
    lsp_start(nv, tmp_path, tmp_path / "long.py", "def f():\n    \n", options(llama_server.url, n_predict=LONG))
    nv.exec_lua(REQUEST, INCOMPLETE, 0, 8)  # the server is probed and warm
    wait_for(lambda: not processing(llama_server.url), what="the server idle")
    before = metric(llama_server.url, "tokens_predicted_total")
    rid = nv.exec_lua("""
        local client = vim.lsp.get_clients({ name = 'local_copilot_lsp' })[1]
        local params = { textDocument = vim.lsp.util.make_text_document_params(0),
                         position = { line = 1, character = 4 } }
        _G.answer = nil
        local _, id = client:request('textDocument/completion', params, function(err, result)
          _G.answer = { err = err and err.code or vim.NIL, result = result }
        end, 0)
        return id""")
    wait_for(lambda: generating(llama_server.url), interval=0.005, what="the server generating")
    nv.exec_lua("vim.lsp.get_clients({ name = 'local_copilot_lsp' })[1]:cancel_request(...)", rid)
    wait_for(lambda: not processing(llama_server.url), what="the generation stopped")
    generated = metric(llama_server.url, "tokens_predicted_total") - before
    assert 0 < generated < LONG / 2, generated
