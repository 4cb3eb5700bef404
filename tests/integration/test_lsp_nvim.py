"""`setup({ lsp = true })`: the in-process language server (lua/local_copilot/lsp.lua) in real
headless Neovim, answered by the running Python host against the real tiny llama-servers.

Completion menus (blink.cmp's `lsp` source, nvim-cmp's cmp-nvim-lsp) cannot be installed here:
the client is called as their documentation says they call it (`client:request(
'textDocument/completion', params, handler, bufnr)`), and through Neovim's own
`vim.lsp.completion`, which accepts an item into the buffer. Neovim 0.12's
vim.lsp.inline_completion is not installable either: `textDocument/inlineCompletion` is asked
through the 0.11 client's `request`.

What a user would see: items with the phrase model's text, asked again as they type
(isIncomplete), an accepted multi-line item at the cursor line's indentation (a tab-indented
one from the phrase model, and a three-line body at four spaces from a phrase model spelled in
tokens, devtools/token_phrase_model.py, whose phrase may repeat characters), a private file
that sends nothing (the recording proxy's requests), and ghost text and the menu at the same
place costing one server request.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local_copilot.devtools.token_phrase_model import write_token_phrase_gguf
from local_copilot.servers.llama_cpp import LlamaServer

from ..fakes.recording_proxy import RecordingProxy
from ..helpers import wait_for
from ..launch import suite_options
from .nvim_session import start_nvim, wait_ghost
from .test_lsp import fills, generating, metric, processing

pytestmark = pytest.mark.integration

INVOKED, TRIGGER_CHARACTER, INCOMPLETE = 1, 2, 3

# as blink.cmp's and cmp-nvim-lsp's sources ask: client:request with a handler, answered later
REQUEST = """
local kind, row, col, method = ...
local client = vim.lsp.get_clients({ name = 'local_copilot' })[1]
_G.lsp_answer = nil
local params = { textDocument = vim.lsp.util.make_text_document_params(0),
                 position = { line = row, character = col }, context = { triggerKind = kind } }
client:request(method or 'textDocument/completion', params, function(err, result)
  _G.lsp_answer = { err = err, result = result or vim.NIL }
end, 0)
"""


def start(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], url: str, path: Path, text: str,
          **more: Any) -> Any:
    path.write_text(text)
    opts = {"backends": {"llama.cpp": {"url": url, "endpoint": "infill"}}, "debounce_ms": 0, "lsp": True,
            "warm_up": False, **more}
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup=opts)
    nv.command(f"edit {path}")
    wait_for(lambda: nv.exec_lua("local c = vim.lsp.get_clients({ name = 'local_copilot', bufnr = 0 })[1];"
                                 " return c ~= nil and c.initialized"), what="the client attached")
    return nv


def ask(nv: Any, kind: int, row: int, col: int, method: str = "textDocument/completion") -> Any:
    nv.exec_lua(REQUEST, kind, row, col, method)
    got = wait_for(lambda: nv.exec_lua("return _G.lsp_answer"), timeout=60, what="the answer")
    assert got.get("err") is None, got
    return got["result"]


@pytest.fixture()
def nvim(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], proxy: RecordingProxy, tmp_path: Path
         ) -> Iterator[Any]:
    nv = start(nvim_bin, manifest, nvim_env, proxy.url, tmp_path / "job.py", "def main():\n\t\n\treturn 0\n")
    yield nv
    nv.close()


def test_items_arrive_and_typing_through_asks_again(nvim: Any, proxy: RecordingProxy) -> None:
    got = ask(nvim, TRIGGER_CHARACTER, 1, 1)
    assert got["isIncomplete"] is True
    [item] = got["items"]  # an automatic trigger: one item
    assert item["label"] == "run(a, b)"
    assert item["documentation"]["kind"] == "markdown" and "```python\nrun(a, b)" in item["documentation"]["value"]
    asked = len(fills(proxy))
    assert asked == 1
    # typing "ru": the client asks again (isIncomplete) and gets an item for the new place
    nvim.api.buf_set_text(0, 1, 1, 1, 1, ["ru"])
    typed = ask(nvim, INCOMPLETE, 1, 3)
    assert typed["isIncomplete"] is True and typed["items"], typed
    assert all(i["textEdit"]["range"]["start"] == {"line": 1, "character": 3} for i in typed["items"])


def accept_first_item(nv: Any, row: int) -> list[Any]:
    """At the end of line `row` (1-based) in Insert mode, open vim.lsp.completion's menu as a
    user does (vim.lsp.completion.get(), as its <C-x><C-o>) and accept its first item
    (<C-n><C-y>); the menu's items."""
    cid = nv.exec_lua("return require('local_copilot.lsp').client_id()")
    nv.command("set completeopt=menuone,noselect")
    nv.exec_lua("vim.lsp.completion.enable(true, ..., 0, { autotrigger = false })", cid)
    nv.api.win_set_cursor(0, [row, 0])
    nv.input("A")
    wait_for(lambda: nv.api.get_mode()["mode"] == "i", what="Insert mode")
    nv.exec_lua("vim.lsp.completion.get()")
    menu: list[Any] = wait_for(lambda: nv.funcs.complete_info(["items"])["items"], timeout=60,
                               what="the completion menu")
    nv.input("<C-n><C-y>")
    return menu


def test_accepting_through_vim_lsp_completion_keeps_the_indentation(nvim: Any) -> None:
    menu = accept_first_item(nvim, 2)
    assert menu[0]["abbr"] == "run(a, b)" and len(menu) <= 3, menu
    # every later line at the cursor line's indentation
    want = ["def main():", "\trun(a, b)", "\tok", "\treturn 0"]
    wait_for(lambda: nvim.current.buffer[:4] == want, what="the item inserted")


def test_autotrigger_opens_the_menu_by_itself_after_a_space_not_inside_a_word(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], proxy: RecordingProxy, tmp_path: Path) -> None:
    """vim.lsp.completion with `autotrigger` asks the server only after its trigger characters:
    typing a word asks nothing; the space after it opens the menu with the suggestion. (Ghost
    text only on request here, so every request the model server gets is the menu's.)"""
    nv = start(nvim_bin, manifest, nvim_env, proxy.url, tmp_path / "job.py", "def main():\n\t\n\treturn 0\n",
               auto_trigger=False)
    try:
        cid = nv.exec_lua("return require('local_copilot.lsp').client_id()")
        nv.command("set completeopt=menuone,noselect")
        nv.exec_lua("vim.lsp.completion.enable(true, ..., 0, { autotrigger = true })", cid)
        nv.api.win_set_cursor(0, [2, 0])
        nv.input("A")
        wait_for(lambda: nv.api.get_mode()["mode"] == "i", what="Insert mode")
        nv.input("xy")
        wait_for(lambda: nv.current.line == "\txy", what="the keys typed")
        nv.input(" ")
        menu = wait_for(lambda: nv.funcs.complete_info(["items"])["items"], timeout=60, what="the menu opened")
        assert [m["abbr"] for m in menu] == ["run(a, b)"], menu  # a trigger character: one item
        # one request, at the space: none for the word's letters
        assert [b["prompt"] for b in fills(proxy)] == ["\txy "], fills(proxy)
    finally:
        nv.close()


# A model that writes a three-line body at an indentation of four spaces: its phrase is spelled
# in tokens (the tiny phrase model spells each character once, so it writes no two line ends)
BODY = ["a", " = 1", "\n", "    ", "b", " = 2", "\n    ", "print(a, b)"]


@pytest.fixture(scope="module")
def body_server(llama_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    d = tmp_path_factory.mktemp("body")
    model = write_token_phrase_gguf(d / "body.gguf", BODY)
    with LlamaServer.for_model(model, binary=llama_bin, log_file=d / "server.log", options=suite_options()) as server:
        yield server


def test_a_function_body_at_indent_4_accepted_through_vim_lsp_completion_lands_at_its_indentation(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], body_server: LlamaServer, tmp_path: Path) -> None:
    """The issue's case: a three-line Python function body at indent 4, accepted through
    vim.lsp.completion with the cursor on an indented line."""
    nv = start(nvim_bin, manifest, nvim_env, body_server.url, tmp_path / "body.py", "def main():\n    \n    return 0\n")
    try:
        assert nv.exec_lua("return { vim.bo.expandtab, vim.bo.shiftwidth }") == [True, 4]  # Python's ftplugin
        menu = accept_first_item(nv, 2)
        assert menu[0]["abbr"] == "a = 1", menu
        want = ["def main():", "    a = 1", "    b = 2", "    print(a, b)", "    return 0"]
        wait_for(lambda: nv.current.buffer[:] == want, what="the item inserted")
        assert nv.api.win_get_cursor(0) == [4, len("    print(a, b)")]  # after the inserted text
    finally:
        nv.close()


def test_ghost_text_and_the_menu_at_one_place_cost_one_server_request(nvim: Any, proxy: RecordingProxy) -> None:
    nvim.api.win_set_cursor(0, [2, 0])
    nvim.input("A")
    wait_ghost(nvim, lambda t: t.startswith("run(a, b)"))
    # (ghost text also fetches what follows it, for after an accept: wait until nothing runs)
    wait_for(lambda: (s := nvim.call("LocalCopilotCall", "debug_state"))["tasks"] == 0 and s["speculative"] == 0,
             what="the host idle")
    here = [b for b in fills(proxy) if b["input_prefix"] == "def main():\n"]
    asked = len(fills(proxy))
    got = ask(nvim, TRIGGER_CHARACTER, 1, 1)
    assert [i["label"] for i in got["items"]] == ["run(a, b)"]
    # the menu's items came from the generation ghost text asked for: no request more
    assert len(here) == 1 and len(fills(proxy)) == asked


def test_invoked_asks_for_alternatives_up_to_three_items(nvim: Any, proxy: RecordingProxy) -> None:
    got = ask(nvim, INVOKED, 1, 1)
    labels = [i["label"] for i in got["items"]]
    assert 1 <= len(labels) <= 3 and labels[0] == "run(a, b)" and len(set(labels)) == len(labels), labels
    sampled = [b for b in fills(proxy) if b.get("temperature")]
    assert sampled, fills(proxy)  # the alternatives were asked for (the phrase model writes its phrase again)


def test_inline_completion_request(nvim: Any) -> None:
    got = ask(nvim, INVOKED, 1, 1, "textDocument/inlineCompletion")
    assert got["items"][0]["insertText"].startswith("run(a, b)"), got
    assert got["items"][0]["range"]["start"] == {"line": 1, "character": 1}


def test_a_private_file_gets_no_items_and_sends_nothing(nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
                                                        proxy: RecordingProxy, tmp_path: Path) -> None:
    nv = start(nvim_bin, manifest, nvim_env, proxy.url, tmp_path / ".env", "TOKEN=\n")
    try:
        got = ask(nv, INVOKED, 0, 6)
        assert got["items"] == []
        assert fills(proxy) == []
    finally:
        nv.close()


LONG = 3000  # tokens a cancelled request asks for: far more than it may generate


@pytest.mark.parametrize("how", ["cancel", "superseded"])
def test_a_cancelled_or_superseded_request_stops_the_servers_generation(
        how: str, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], llama_server: LlamaServer,
        tmp_path: Path) -> None:
    nv = start(nvim_bin, manifest, nvim_env, llama_server.url, tmp_path / "long.py", "def f():\n    \n")
    try:
        nv.exec_lua("require('local_copilot').setup(...)",
                    {"backends": {"llama.cpp": {"url": llama_server.url}}, "lsp": True, "warm_up": False,
                     "n_predict": LONG, "n_predict_first": 0, "max_lines": 1000, "t_max_predict_ms": 60000})
        ask(nv, TRIGGER_CHARACTER, 0, 8)  # the server is probed and warm
        wait_for(lambda: not processing(llama_server.url), what="the server idle")
        before = metric(llama_server.url, "tokens_predicted_total")
        nv.exec_lua(REQUEST, TRIGGER_CHARACTER, 1, 4, "textDocument/completion")
        wait_for(lambda: generating(llama_server.url), interval=0.005, what="the server generating")
        if how == "cancel":
            nv.exec_lua("local c = vim.lsp.get_clients({ name = 'local_copilot' })[1];"
                        " c:cancel_request(c.requests and next(c.requests) or 0)")
        else:  # a newer request for the buffer replaces it (at the first place: the cache answers it)
            nv.exec_lua(REQUEST, TRIGGER_CHARACTER, 0, 8, "textDocument/completion")
        wait_for(lambda: not processing(llama_server.url), what="the generation stopped")
        generated = metric(llama_server.url, "tokens_predicted_total") - before
        assert 0 < generated < LONG / 2, generated
    finally:
        nv.close()


def test_a_first_request_before_the_host_has_the_options_is_answered(nvim_bin: str, manifest: Path,
                                                                      nvim_env: dict[str, str],
                                                                      proxy: RecordingProxy, tmp_path: Path) -> None:
    """The options reach the host a moment after the first request: on the worker's own
    channel while the request goes on the host's, a race the host must not lose (here made
    sure by holding them back)."""
    nv = start(nvim_bin, manifest, nvim_env, proxy.url, tmp_path / "job.py", "def main():\n\t\n\treturn 0\n")
    try:
        # the options held back from the start: the plugin's own host (python.lua) may send
        # them with whatever starts it, and this race needs a host that has none yet
        nv.exec_lua("""
            local config = require('local_copilot.config')
            _G.held_unsent = config.unsent
            config.unsent = function() return nil end
        """)
        # the host started by something else (a sync call, as `:LocalCopilot status` starts it)
        wait_for(lambda: nv.call("LocalCopilotCall", "debug_state")["channel"], what="the worker's own channel")
        assert nv.call("LocalCopilotCall", "status")["backend"] is None  # no options yet
        # the request at once, its options held back for 300 ms more
        nv.exec_lua("""
            local config, host = require('local_copilot.config'), require('local_copilot.host')
            local ok, err = pcall(loadstring(...), 2, 1, 1)  -- TRIGGER_CHARACTER at (1, 1)
            config.unsent = _G.held_unsent
            assert(ok, err)
            vim.defer_fn(function() host.emit('config', config.unsent()) end, 300)
        """, REQUEST)
        got = wait_for(lambda: nv.exec_lua("return _G.lsp_answer"), timeout=60, what="the answer")
        assert [i["label"] for i in got["result"]["items"]] == ["run(a, b)"], got
        assert len(fills(proxy)) == 1
    finally:
        nv.close()


def help_tab_mapping() -> str:
    """The help's `<Tab>` for the built-in menu (|local-copilot-menus|), exactly as written there."""
    help_text = (Path(__file__).resolve().parents[2] / "doc" / "local_copilot.txt").read_text()
    block = help_text.split("a selected menu item wins, else the ghost text, else a Tab: >lua\n", 1)[1]
    return block.split("\n<", 1)[0]


@pytest.fixture()
def tabbed(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], proxy: RecordingProxy, tmp_path: Path
           ) -> Iterator[Any]:
    """The help's <Tab> mapping loaded as written, ghost text kept during completion."""
    nv = start(nvim_bin, manifest, nvim_env, proxy.url, tmp_path / "job.py", "def main():\n\t\n\treturn 0\n",
               hide_during_completion=False)
    nv.exec_lua(help_tab_mapping())
    # which menu item was accepted, if any
    nv.exec_lua("vim.api.nvim_create_autocmd('CompleteDone', { callback = function()"
                " _G.done = { item = vim.v.completed_item, reason = vim.v.event.reason } end })")
    nv.command("set completeopt=menuone,noselect")
    yield nv
    nv.close()


def insert_at_end(nv: Any, row: int) -> None:
    nv.api.win_set_cursor(0, [row, 0])
    nv.input("A")
    wait_for(lambda: nv.api.get_mode()["mode"] == "i", what="Insert mode")


ACCEPTED_Z = ["def main():", "\trun(a, b)", "\tokz", "\treturn 0"]


def test_help_tab_accepts_a_selected_menu_item_over_the_ghost_text(tabbed: Any) -> None:
    nv = tabbed
    cid = nv.exec_lua("return require('local_copilot.lsp').client_id()")
    nv.exec_lua("vim.lsp.completion.enable(true, ..., 0, { autotrigger = false })", cid)
    insert_at_end(nv, 2)
    wait_ghost(nv, lambda t: t.startswith("run(a, b)"))
    nv.exec_lua("vim.lsp.completion.get()")
    wait_for(lambda: nv.funcs.complete_info(["items"])["items"], timeout=60, what="the completion menu")
    nv.input("<C-n>")
    wait_for(lambda: nv.funcs.complete_info(["selected"])["selected"] == 0, what="the item selected")
    assert nv.exec_lua("return require('local_copilot').is_visible()")  # both: the menu and ghost text
    nv.input("<Tab>z")  # a key typed ahead lands after what the Tab inserts
    wait_for(lambda: nv.current.buffer[:] == ACCEPTED_Z, what="the item inserted")
    done = nv.exec_lua("return _G.done")
    assert done["reason"] == "accept" and done["item"]["abbr"] == "run(a, b)", done  # by the menu


def test_help_tab_accepts_the_ghost_text_without_a_menu(tabbed: Any) -> None:
    nv = tabbed
    insert_at_end(nv, 2)
    wait_ghost(nv, lambda t: t.startswith("run(a, b)"))
    assert nv.funcs.pumvisible() == 0
    nv.input("<Tab>z")
    wait_for(lambda: nv.current.buffer[:] == ACCEPTED_Z, what="the ghost text inserted")
    assert nv.exec_lua("return _G.done") is None  # no menu took part


def test_help_tab_inserts_a_tab_with_neither(tabbed: Any) -> None:
    nv = tabbed
    nv.exec_lua("require('local_copilot').disable()")  # no ghost text
    nv.command("setlocal noexpandtab softtabstop=0")  # a Tab key inserts a tab character
    insert_at_end(nv, 2)
    nv.input("x<Tab>y")  # typed ahead: the Tab goes before the y
    wait_for(lambda: nv.current.buffer[1] == "\tx\ty", what="a Tab typed in its place")
    assert nv.funcs.pumvisible() == 0 and nv.api.get_mode()["mode"] == "i"


# The menus' LSP sources, calling the client as they do (their sources read for this:
# blink.cmp's lua/blink/cmp/sources/lsp/completion.lua and cmp-nvim-lsp's
# lua/cmp_nvim_lsp/source.lua): position params in the client's offset encoding, the trigger
# kind and character of the menu's context, and the previous request cancelled before the next.
BLINK_LIKE = """
local kind, char = ...
local client = vim.lsp.get_clients({ name = 'local_copilot', bufnr = 0 })[1]
local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
params.context = { triggerKind = kind }
if char ~= vim.NIL then params.context.triggerCharacter = char end
_G.answers = _G.answers or {}
local n = #_G.answers + 1
_G.answers[n] = false
if _G.last_id then client:cancel_request(_G.last_id) end
local _, id = client:request('textDocument/completion', params, function(err, result)
  -- as blink.cmp makes a response of it
  _G.answers[n] = { err = err or vim.NIL, incomplete_forward = result ~= nil and (result.isIncomplete or false),
                    items = result and (result.items or result) or {} }
end)
_G.last_id = id
"""

CMP_LIKE = """
local kind, char = ...
local client = vim.lsp.get_clients({ name = 'local_copilot', bufnr = 0 })[1]
local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
params.context = { triggerKind = kind, triggerCharacter = char ~= vim.NIL and char or nil }
_G.answers = _G.answers or {}
local n = #_G.answers + 1
_G.answers[n] = false
if _G.last_id then client.cancel_request(_G.last_id) end  -- cmp-nvim-lsp calls with a dot
local _, id = client.request('textDocument/completion', params, function(a1, a2, a3)
  -- the new handler signature (err, result), or the old one (err, method, result)
  local result = a2 == 'textDocument/completion' and a3 or a2
  _G.answers[n] = { err = a1 or vim.NIL, incomplete = result ~= nil and result.isIncomplete,
                    items = result and (result.items or result) or {} }
end)
_G.last_id = id
"""


@pytest.mark.parametrize("source", ["blink", "cmp"])
def test_the_menus_sources_get_items_in_byte_columns_and_cancel_the_last_request(
        source: str, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], proxy: RecordingProxy,
        tmp_path: Path) -> None:
    nv = start(nvim_bin, manifest, nvim_env, proxy.url, tmp_path / "job.py", 'def main():\n\ts = "é" \n\treturn 0\n',
               auto_trigger=False)
    try:
        call = BLINK_LIKE if source == "blink" else CMP_LIKE
        assert nv.exec_lua("return vim.lsp.get_clients({ name = 'local_copilot' })[1].offset_encoding") == "utf-8"
        line = nv.current.buffer[1]
        nv.api.win_set_cursor(0, [2, len(line.encode())])
        nv.input("a")  # Insert mode after the space, as a menu asks there
        wait_for(lambda: nv.api.get_mode()["mode"] == "i", what="Insert mode")
        nv.exec_lua(call, TRIGGER_CHARACTER, " ")
        nv.exec_lua(call, INVOKED, None)  # the menu asked again: the first one is cancelled
        # both answered: a request cancelled before the host began it too (it got no answer before)
        answers = wait_for(lambda: (a := nv.exec_lua("return _G.answers")) and all(a) and a, timeout=60,
                           what="both answers")
        last = answers[1]
        assert last["err"] is None and last["items"], answers
        assert last.get("incomplete_forward", last.get("incomplete")) is True  # typing asks again
        assert last["items"][0]["label"] == "run(a, b)"
        # the column in bytes ("é" is 2 of them), the unit the client said it counts in
        assert last["items"][0]["textEdit"]["range"]["start"] == {"line": 1, "character": len(line.encode())}
        assert answers[0]["items"] == []  # cancelled: answered with nothing
    finally:
        nv.close()


def test_the_menu_where_ghost_text_has_its_first_part_gets_the_whole_from_one_continuation(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], proxy: RecordingProxy, tmp_path: Path) -> None:
    # the server's own FIM prompt (not /infill), so a first part can be continued. (Which of
    # the two continues first is a race here; tests/unit/test_engine_staged.py forces each order.)
    nv = start(nvim_bin, manifest, nvim_env, proxy.url, tmp_path / "job.py", "def main():\n\nreturn 0\n",
               backends={"llama.cpp": {"url": proxy.url}}, n_predict_first=2, speculative=False)
    try:
        nv.api.win_set_cursor(0, [2, 0])
        nv.input("A")
        # ghost text shows its first part, and its continuation may already have followed (it
        # runs once the user pauses: a race here; tests/unit/test_engine_staged.py forces each order)
        wait_ghost(nv)
        # the menu at once: it is answered with the whole suggestion, not the first part ...
        got = ask(nv, TRIGGER_CHARACTER, 1, 1)
        assert [i["label"] for i in got["items"]] == ["run(a, b)"], got
        # ... and ghost text, continued once the user pauses, shows the same whole
        wait_ghost(nv, lambda t: t.startswith("run(a, b)") and "\n" in t)
        wait_for(lambda: nv.call("LocalCopilotCall", "debug_state")["tasks"] == 0, what="the host idle")
        rests = [b for b in fills(proxy) if b.get("n_predict", 0) > 2]
        # one continuation wrote the rest for both
        assert len(rests) == 1, [(b.get("n_predict"), str(b.get("prompt", ""))[-40:]) for b in fills(proxy)]
    finally:
        nv.close()
