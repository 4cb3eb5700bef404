"""Instruction edits in a real headless Neovim with a UI attached, against a loopback FAKE chat
server (tests/fakes/fake_chat.py) that answers as each test needs and records the prompt it
got: the preview on screen, the buffer after accept, cancel, retry and a follow-up, and one
clear message (buffer untouched) for every fault."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local_copilot.servers.ports import free_port

from ..fakes.fake_chat import CLOSE, FakeChat, chat_sse, ollama_ndjson, user_prompt
from ..helpers import wait_for
from .nvim_session import attach_ui, buffer_text, lua, screen_lines, start_nvim

pytestmark = pytest.mark.integration

LINES = ["def add(a, b):", "    return a + b", "", "", "def sub(a, b):", "    return a - b"]
TYPED = ["```python\n", "def add(a: int, b: int) -> int:\n", "    return a + b\n", "```"]
TYPED_LINES = ["def add(a: int, b: int) -> int:", "    return a + b"]


class Session:
    def __init__(self, nvim: Any, fake: FakeChat) -> None:
        self.nvim, self.fake = nvim, fake

    def edit(self, line1: int, line2: int, instruction: str) -> int:
        return self.nvim.exec_lua("return require('local_copilot').edit(...)",
                                  {"line1": line1, "line2": line2, "instruction": instruction})

    def state(self, edit_id: int) -> str | None:
        return self.nvim.exec_lua("local e = require('local_copilot.edit').edits[...]; return e and e.state", edit_id)

    def wait_state(self, edit_id: int, state: str) -> None:
        wait_for(lambda: self.state(edit_id) == state, what=f"edit {edit_id} {state}; screen: {self.screen()}")

    def screen(self) -> str:
        return "\n".join(screen_lines(self.nvim))

    def messages(self) -> str:
        return self.nvim.exec_lua("return vim.fn.execute('messages')")

    def wait_message(self, text: str) -> str:
        return wait_for(lambda: text in self.messages() and self.messages(), what=f"message {text!r}")

    def marks(self) -> list[Any]:
        return self.nvim.exec_lua("return vim.api.nvim_buf_get_extmarks(0, require('local_copilot.edit').ns, 0, -1,"
                                  " { details = true })")

    def removed_rows(self) -> list[int]:
        return sorted(m[1] for m in self.marks() if m[3].get("line_hl_group") == "LocalCopilotEditRemoved")

    def idle(self) -> bool:
        return lua(self.nvim, "vim.fn.LocalCopilotCall('debug_state').edits") == 0


def session(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path, fake: FakeChat,
            backend: dict[str, Any] | None = None, name: str = "sample.py", **opts: Any) -> Session:
    setup = {"backends": {"llama.cpp": {"url": fake.url}}, "auto_trigger": False, **opts}
    if backend is not None:
        setup.update(backend)
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup=setup, columns=100, lines=30)
    attach_ui(nvim, 100, 30)
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(LINES) + "\n")
    nvim.command(f"edit {path}")
    return Session(nvim, fake)


@pytest.fixture()
def make(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> Iterator[Any]:
    made: list[Session] = []

    def build(answers: list[Any], *, kind: str = "llama.cpp", n_ctx: int = 4096, **kw: Any) -> Session:
        fake = FakeChat(answers, kind=kind, n_ctx=n_ctx)
        s = session(nvim_bin, manifest, nvim_env, tmp_path, fake, **kw)
        made.append(s)
        return s

    yield build
    for s in made:
        s.nvim.close()
        s.fake.close()


def test_the_answer_previews_as_a_diff_and_accept_replaces_the_range(make: Any) -> None:
    s = make([chat_sse(TYPED)])
    edit_id = s.edit(1, 2, "add type hints")
    s.wait_state(edit_id, "done")
    # the prompt: the selection marked, the code around it, the file's name and language
    [body] = s.fake.chats
    prompt = user_prompt(body)
    assert "<selection>\ndef add(a, b):\n    return a + b\n</selection>" in prompt
    assert "File: sample.py" in prompt and "Language: python" in prompt
    assert "</selection>\n\n\ndef sub(a, b):\n    return a - b\n</code>" in prompt
    assert prompt.endswith("Instruction: add type hints")
    assert "replacement code" in body["messages"][0]["content"] and body["messages"][0]["role"] == "system"
    assert body["stream"] is True and body["cache_prompt"] is True
    # the preview: the changed line marked removed, its replacement as a virtual line under it,
    # the unchanged line left alone, the fences gone
    screen = s.screen()
    assert "def add(a: int, b: int) -> int:" in screen and "```" not in screen
    assert "edit ready" in screen
    assert s.removed_rows() == [0]
    rows = screen.split("\n")
    i = rows.index("def add(a, b):")
    assert rows[i + 1] == "def add(a: int, b: int) -> int:"
    assert rows[i + 2] == "    return a + b"
    assert buffer_text(s.nvim) == "\n".join(LINES)  # nothing changes before accept
    # the added line is drawn in the buffer's highlighting over the added-line background
    [added] = [m for m in s.marks() if m[3].get("virt_lines") and "def add(a: int" in
               "".join(c[0] for c in m[3]["virt_lines"][0])]
    groups = [c[1] for c in added[3]["virt_lines"][0]]
    assert all("LocalCopilotEditAdded" in (g if isinstance(g, list) else [g]) for g in groups)
    assert lua(s.nvim, "require('local_copilot').edit_visible()") is True
    # accept: the range replaced in one undo step, the preview gone
    s.nvim.input("<Tab>")
    wait_for(lambda: s.nvim.current.buffer[0] == TYPED_LINES[0], what="the edit accepted")
    assert buffer_text(s.nvim) == "\n".join(TYPED_LINES + LINES[2:])
    assert s.marks() == [] and lua(s.nvim, "require('local_copilot').edit_visible()") is False
    assert "edit ready" not in s.screen()
    s.nvim.command("undo")
    assert buffer_text(s.nvim) == "\n".join(LINES)


def test_the_preview_streams_with_progress_and_esc_cancels_it(make: Any) -> None:
    # the first line, a pause, then a line every 50 ms for 20 s
    steps = chat_sse(["def add(a, b):\n"], finish=None, done=False) + [2.0]
    steps += chat_sse(["    # adds\n"] + ["    x = 1\n"] * 400, delay=0.05)[1:]
    s = make([steps])
    edit_id = s.edit(1, 2, "comment it")
    # only the first line so far, which the selection has too: nothing is marked yet (the
    # rest of the selection is what the answer has not reached)
    wait_for(lambda: s.state(edit_id) == "streaming", what="the first line streamed in")
    assert s.removed_rows() == [] and "def add(a, b):" in s.screen()
    wait_for(lambda: "# adds" in s.screen(), what="the next lines streamed in")
    assert s.state(edit_id) == "streaming"
    assert "edit: generating" in s.screen()
    assert s.removed_rows() == []  # the selection's tail the answer has not reached is not marked
    s.nvim.input("<Esc>")
    wait_for(lambda: s.marks() == [], what="the preview gone")
    wait_for(s.idle, what="the request stopped")
    wait_for(lambda: s.fake.disconnects >= 1, what="the server saw the request closed")
    assert "generating" not in s.screen()
    assert buffer_text(s.nvim) == "\n".join(LINES)


def test_retry_asks_again_and_shows_the_new_answer(make: Any) -> None:
    s = make([chat_sse(["def add(a, b):\n    return b + a\n"]), chat_sse(["def add(a, b):\n    return sum((a, b))\n"])])
    edit_id = s.edit(1, 2, "rewrite")
    s.wait_state(edit_id, "done")
    assert "return b + a" in s.screen()
    assert lua(s.nvim, "require('local_copilot').edit_retry()") is True
    wait_for(lambda: "return sum((a, b))" in s.screen(), what="the retried answer")
    s.wait_state(edit_id, "done")
    assert "return b + a" not in s.screen()
    first, second = s.fake.chats
    assert second["temperature"] > first["temperature"]  # the same question would get the same answer
    assert user_prompt(first) == user_prompt(second)
    assert lua(s.nvim, "require('local_copilot').edit_accept()") is True
    assert buffer_text(s.nvim) == "\n".join(["def add(a, b):", "    return sum((a, b))"] + LINES[2:])


def test_a_follow_up_instruction_refines_the_answer(make: Any) -> None:
    s = make([chat_sse(["def plus(a, b):\n    return a + b\n"]),
              chat_sse(["def plus(a: int, b: int) -> int:\n    return a + b\n"])])
    edit_id = s.edit(1, 2, "rename to plus")
    s.wait_state(edit_id, "done")
    s.nvim.command("LocalCopilotEdit and add type hints")
    wait_for(lambda: len(s.fake.chats) == 2, what="the follow-up request")
    s.wait_state(edit_id, "done")
    follow = s.fake.chats[1]["messages"]
    assert [m["role"] for m in follow] == ["system", "user", "assistant", "user"]
    assert follow[2]["content"] == "def plus(a, b):\n    return a + b"
    assert follow[3]["content"].endswith("Instruction: and add type hints")
    assert "def plus(a: int, b: int) -> int:" in s.screen()
    # without an instruction it is asked for; meanwhile the prompt so far warms the cache
    s.nvim.input(":LocalCopilotEdit<CR>")
    wait_for(lambda: len(s.fake.warms) == 1, what="the follow-up's warm-up")
    assert "Follow up:" in s.screen()
    s.nvim.input("keep it<CR>")
    wait_for(lambda: len(s.fake.chats) == 3, what="the second follow-up")
    warm, third = s.fake.warms[0]["messages"], s.fake.chats[2]["messages"]
    assert warm[:-1] == third[:-1] and len(third) == 6
    assert third[-1]["content"] == warm[-1]["content"] + "keep it"
    s.wait_state(edit_id, "done")
    s.nvim.input("<Tab>")
    wait_for(lambda: s.nvim.current.buffer[0] == "def plus(a: int, b: int) -> int:", what="accepted")
    assert s.nvim.current.buffer[1] == "    return a + b"


def test_the_visual_mapping_asks_for_the_instruction_and_warms_the_prompt_meanwhile(make: Any) -> None:
    s = make([chat_sse(["def sub(a, b):\n    return b - a\n"])])
    s.nvim.command("xmap ge <Plug>(local-copilot-edit)")
    s.nvim.command("normal! 5G")
    s.nvim.input("Vjge")
    wait_for(lambda: len(s.fake.warms) == 1, what="the warm-up request while the instruction is typed")
    warm = s.fake.warms[0]
    assert warm["n_predict"] == 0 and warm["cache_prompt"] is True
    assert user_prompt(warm).endswith("Instruction: ")
    assert "Edit lines 5-6:" in s.screen()
    s.nvim.input("swap them<CR>")
    wait_for(lambda: len(s.fake.chats) == 1, what="the edit request")
    # the warm-up's prompt is the real one's start: the server's cache holds all of it
    assert user_prompt(s.fake.chats[0]) == user_prompt(warm) + "swap them"
    wait_for(lambda: "return b - a" in s.screen(), what="the preview")
    assert s.nvim.exec_lua("return vim.fn.histget('@', -1)") == "swap them"  # the prompt's history
    assert s.removed_rows() == [5]


def test_two_edits_in_different_places_run_at_once(make: Any) -> None:
    def slow(body: dict[str, Any]) -> list[Any]:
        name = "add" if "def add(a, b)" in user_prompt(body).split("<selection>")[1] else "sub"
        return chat_sse([f"def {name}2(a, b):\n", "    return 0\n"], delay=0.3)

    s = make([slow])
    first = s.edit(1, 2, "stub it")
    second = s.edit(5, 6, "stub it")
    wait_for(lambda: len(s.fake.chats) == 2, what="both requests out at once")
    s.wait_state(first, "done")
    s.wait_state(second, "done")
    screen = s.screen()
    assert "def add2(a, b):" in screen and "def sub2(a, b):" in screen
    s.nvim.command("normal! 5G")
    assert lua(s.nvim, "require('local_copilot').edit_accept()") is True  # the edit at the cursor
    s.nvim.command("normal! 1G")
    assert lua(s.nvim, "require('local_copilot').edit_accept()") is True
    assert buffer_text(s.nvim) == "\n".join(["def add2(a, b):", "    return 0", "", "", "def sub2(a, b):", "    return 0"])


def test_ollama_chat_endpoint(make: Any) -> None:
    s = make([ollama_ndjson(["def add(a, b):\n", "    return a + b  # sum\n"])], kind="ollama",
             backend={"backend": "ollama", "backends": {"ollama": {"url": None, "model": "qwen2.5-coder:7b-instruct"}}})
    s.nvim.exec_lua("require('local_copilot').setup(...)", {
        "backend": "ollama", "auto_trigger": False,
        "backends": {"ollama": {"url": s.fake.url, "model": "qwen2.5-coder:7b-instruct"}}})
    edit_id = s.edit(1, 2, "comment the sum")
    s.wait_state(edit_id, "done")
    [body] = s.fake.chats
    assert body["model"] == "qwen2.5-coder:7b-instruct" and body["stream"] is True
    assert body["options"]["num_predict"] > 0
    assert "return a + b  # sum" in s.screen()
    assert s.removed_rows() == [1]
    s.nvim.input("<Tab>")
    wait_for(lambda: s.nvim.current.buffer[1] == "    return a + b  # sum", what="accepted")


def test_edit_backend_entry_sends_to_an_instruct_model_beside_the_fim_one(make: Any) -> None:
    s = make([chat_sse(["def add(a, b):\n    return a + b\n"])], kind="openai")
    s.nvim.exec_lua("require('local_copilot').setup(...)", {
        "auto_trigger": False, "edit": {"backend": "inst"},
        "backends": {"llama.cpp": {"url": "http://127.0.0.1:9"}, "inst": {"kind": "openai", "url": s.fake.url}}})
    edit_id = s.edit(1, 2, "no change")
    s.wait_state(edit_id, "done")
    assert s.fake.chats[0]["model"] == "fake-instruct"  # as /v1/models named it (vLLM needs it)
    assert s.fake.warms == []


# -- faults: one clear message, the buffer untouched ------------------------------------------


def assert_failed_cleanly(s: Session, message: str) -> str:
    text = s.wait_message(message)
    assert "Traceback" not in text and "stack traceback" not in text
    wait_for(lambda: not any(m[3].get("virt_lines") or m[3].get("line_hl_group") for m in s.marks()),
             what="no preview left")
    assert "edit ready" not in s.screen() and "generating" not in s.screen()
    assert buffer_text(s.nvim) == "\n".join(LINES)
    assert lua(s.nvim, "require('local_copilot').edit_accept()") is False
    return text


def test_server_down(make: Any) -> None:
    s = make([chat_sse(["x\n"])])
    s.nvim.exec_lua("require('local_copilot').setup(...)",
                    {"auto_trigger": False, "backends": {"llama.cpp": {"url": f"http://127.0.0.1:{free_port()}"}}})
    s.edit(1, 2, "anything")
    assert_failed_cleanly(s, "cannot reach")


def test_an_answer_cut_mid_stream(make: Any) -> None:
    s = make([chat_sse(["def add(a, b):\n", "    return"], finish=None, done=False) + [CLOSE]])
    s.edit(1, 2, "anything")
    assert_failed_cleanly(s, "broke off")


def test_an_answer_that_is_not_code(make: Any) -> None:
    s = make([chat_sse(["I'm sorry, but I can't help with that request."])])
    s.edit(1, 2, "anything")
    text = assert_failed_cleanly(s, "answered without code")
    assert "I'm sorry" in text


def test_a_selection_larger_than_the_servers_context(make: Any) -> None:
    s = make([chat_sse(["x\n"])], n_ctx=256)
    s.nvim.current.buffer[:] = [f"value_{i} = compute({i}, {i + 1})" for i in range(120)]
    s.nvim.command("write")
    lines = list(s.nvim.current.buffer[:])
    s.edit(1, 120, "anything")
    text = s.wait_message("too large")
    assert "the server takes 256 per request" in text and "Traceback" not in text
    assert s.fake.chats == []  # nothing was sent
    assert list(s.nvim.current.buffer[:]) == lines


def test_a_slow_server_shows_progress_until_cancelled(make: Any) -> None:
    s = make([[5.0] + chat_sse(["x\n"])])
    edit_id = s.edit(1, 2, "anything")
    wait_for(lambda: "edit: waiting for the model" in s.screen(), what="the progress line")
    # the seconds go on while the server says nothing
    wait_for(lambda: re.search(r"waiting for the model, (0\.[5-9]|[1-9]\d*\.\d) s", s.screen()),
             what="the elapsed time counting")
    assert s.state(edit_id) == "waiting"
    assert lua(s.nvim, "require('local_copilot').edit_cancel()") is True
    wait_for(s.idle, what="the request stopped")
    assert s.marks() == [] and buffer_text(s.nvim) == "\n".join(LINES)


def test_a_server_silent_past_the_edit_timeout(make: Any) -> None:
    s = make([chat_sse(["def add(a, b):\n"], finish=None, done=False) + [5.0] + chat_sse(["x\n"])[1:]],
             edit={"timeout_ms": 1000})
    edit_id = s.edit(1, 2, "anything")
    wait_for(lambda: s.state(edit_id) == "streaming" or "said nothing" in s.messages(), what="the first line")
    text = assert_failed_cleanly(s, "the server said nothing for 1 s (edit.timeout_ms) mid-answer")
    assert text.count("local-copilot:") == 1


def test_a_private_file_is_never_sent(make: Any) -> None:
    s = make([chat_sse(["x\n"])], name=".ssh/notes.py")
    assert lua(s.nvim, "require('local_copilot').edit({ line1 = 1, line2 = 2, instruction = 'x' })") is False
    s.wait_message("never sent")
    assert s.fake.chats == [] and s.fake.warms == []


def test_a_credential_in_the_text_is_never_sent(make: Any) -> None:
    s = make([chat_sse(["x\n"])])
    s.nvim.current.buffer[3:3] = ["-----BEGIN RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn", "-----END RSA PRIVATE KEY-----"]
    assert s.edit(1, 2, "anything")  # the path is fine; the host reads the text around the selection
    text = s.wait_message("not sent")
    assert "private-key block" in text
    assert s.fake.chats == [] and s.fake.warms == []


def test_accept_in_a_buffer_that_cannot_change_says_so(make: Any) -> None:
    s = make([chat_sse(["def add(a, b): return a + b\n"])])
    edit_id = s.edit(1, 2, "one line")
    s.wait_state(edit_id, "done")
    s.nvim.command("setlocal nomodifiable")
    assert lua(s.nvim, "require('local_copilot').edit_accept()") is False
    text = s.wait_message("cannot change this buffer")
    assert "stack traceback" not in text and "not 'modifiable'" in text
    assert buffer_text(s.nvim) == "\n".join(LINES) and s.state(edit_id) == "done"  # still there


def test_the_range_command(make: Any) -> None:
    s = make([chat_sse(["def add(a, b): return a + b\n"])])
    s.nvim.command("1,2LocalCopilotEdit one line")
    wait_for(lambda: "edit ready" in s.screen(), what="the preview")
    assert "<selection>\ndef add(a, b):\n    return a + b\n</selection>" in user_prompt(s.fake.chats[0])
    assert s.removed_rows() == [0, 1]
    assert lua(s.nvim, "require('local_copilot').edit_accept()") is True
    assert buffer_text(s.nvim) == "\n".join(["def add(a, b): return a + b"] + LINES[2:])


def test_retry_after_a_failure_asks_again(make: Any) -> None:
    s = make([chat_sse(["Sorry, I cannot do that."]), chat_sse(["def add(a, b):\n    return a + b + 0\n"])])
    s.edit(1, 2, "anything")
    s.wait_message("answered without code")
    assert lua(s.nvim, "require('local_copilot').edit_retry()") is True
    wait_for(lambda: "return a + b + 0" in s.screen(), what="the retried answer")


def test_added_lines_are_drawn_in_the_buffers_syntax_highlighting(make: Any) -> None:
    # Neovim ships a Lua tree-sitter parser: the preview's added lines use its highlights
    s = make([chat_sse(["local function add(a, b)\n", "  return a + b\n", "end\n"])], name="sample.lua")
    edit_id = s.edit(1, 2, "in Lua")
    s.wait_state(edit_id, "done")
    chunks = [c for m in s.marks() for vl in (m[3].get("virt_lines") or []) for c in vl]
    local = next(c for c in chunks if c[0].startswith("local"))
    assert isinstance(local[1], list) and local[1][0] == "LocalCopilotEditAdded"
    assert local[1][1].startswith("@keyword") and local[1][1].endswith(".lua")
    assert "local function add(a, b)" in s.screen()
