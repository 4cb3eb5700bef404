"""Next edits end to end: real headless Neovim with a UI attached, the plugin registered by
:UpdateRemotePlugins, and a fake next-edit model per format (tests/fakes/fake_next_edit.py)
that reads the prompt as the format defines it. The user renames a parameter; the next edit
renames its use below."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..fakes.fake_next_edit import FakeNextEditModel
from ..helpers import wait_for
from .nvim_session import attach_ui, buffer_text, lua, screen_lines, start_nvim

pytestmark = pytest.mark.integration

TEXT = ["def area(w, h):", "    return w * h", "", "print(area(2, 3))"]


def marks(nvim: Any) -> list[Any]:
    return nvim.exec_lua("local ne = require('local_copilot.next_edit')\n"
                         "return vim.api.nvim_buf_get_extmarks(0, ne.ns, 0, -1, { details = true })")


def stats(nvim: Any) -> dict[str, Any]:
    return nvim.exec_lua("return vim.fn.LocalCopilotCall('stats')")["next_edit"]


def session(nvim_bin: str, manifest: Path, env: dict[str, str], url: str, tmp: Path, name: str = "calc.py",
            ui: bool = True, **next_edit: Any) -> Any:
    opts = {"backends": {"llama.cpp": {"url": url}}, "next_edit": {"enabled": True, "debounce_ms": 20, **next_edit}}
    nv = start_nvim(nvim_bin, manifest, env, setup=opts)
    if ui:
        attach_ui(nv)
    nv.command(f"cd {tmp}")
    (tmp / name).write_text("\n".join(TEXT) + "\n")
    nv.command(f"edit {tmp / name}")
    return nv


def rename_parameter(nvim: Any) -> None:
    """In Normal mode on `w` of line 1: ciw width <Esc> (leaving Insert mode asks)."""
    nvim.api.win_set_cursor(0, [1, 9])
    nvim.input("ciwwidth<Esc>")
    wait_for(lambda: nvim.api.get_mode()["mode"] == "n" and nvim.current.buffer[0] == "def area(width, h):")


@pytest.fixture(params=["sweep", "zeta", "zeta2"])
def fake(request: Any) -> Any:
    server = FakeNextEditModel(request.param)
    yield server
    server.close()


def test_rename_shows_the_next_edit_and_accept_jumps_then_applies(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], fake: Any, tmp_path: Path) -> None:
    nvim = session(nvim_bin, manifest, nvim_env, fake.url, tmp_path)
    try:
        rename_parameter(nvim)
        wait_for(lambda: lua(nvim, "require('local_copilot').next_edit_visible()"), what="a next edit shown")
        # the prompt the model got holds the rename, as the format writes recent edits
        prompt = fake.prompts[-1]
        if fake.fmt == "sweep":
            # paths relative to Neovim's working directory, as in the model's training repositories
            # the blocks carry the unchanged rows around the change (up to 3 each side)
            assert ("<|file_sep|>calc.py.diff\noriginal:\ndef area(w, h):\n    return w * h\n\nprint(area(2, 3))\n"
                    "updated:\ndef area(width, h):\n    return w * h\n\nprint(area(2, 3))\n") in prompt
            assert "<|file_sep|>current/calc.py:1:4\ndef area(widt<|cursor|>h, h):" in prompt
        elif fake.fmt == "zeta":
            assert "@@ -1,4 +1,4 @@\n-def area(w, h):\n+def area(width, h):\n     return w * h\n \n print(area(2, 3))\n```" \
                in prompt
            assert 'User edited "calc.py"' in prompt
            assert "def area(widt<|user_cursor_is_here|>h, h):" in prompt
        else:
            assert "<filename>edit_history\n--- a/calc.py\n+++ b/calc.py\n" in prompt
            assert "+def area(width, h):" in prompt and "<filename>calc.py\n" in prompt
        # on screen: the inserted text inline where it applies, a marker at the cursor's row
        screen = screen_lines(nvim)
        assert screen[1] == "    return width * h"
        assert "next edit: line 2" in screen[0]
        assert nvim.current.buffer[1] == "    return w * h"  # nothing applied without an accept
        # first accept: the cursor goes to the edit
        assert lua(nvim, "require('local_copilot').next_edit_accept()") is True
        assert tuple(nvim.current.window.cursor) == (2, 12)
        assert "next edit" not in screen_lines(nvim)[0]
        assert lua(nvim, "vim.fn.getjumplist()[1][#vim.fn.getjumplist()[1]].lnum") == 1  # <C-o> goes back
        requests = len(fake.prompts)
        # second accept: applied, the cursor at its end, and the next edit asked for (the chain)
        assert lua(nvim, "require('local_copilot').next_edit_accept()") is True
        assert buffer_text(nvim) == "def area(width, h):\n    return width * h\n\nprint(area(2, 3))"
        assert tuple(nvim.current.window.cursor) == (2, 15)
        assert marks(nvim) == []
        wait_for(lambda: len(fake.prompts) > requests, what="the chained request")
        wait_for(lambda: stats(nvim)["quiet"] >= 1, what="the chained request answered: nothing left to rename")
        nvim.command("undo")
        assert nvim.current.buffer[1] == "    return w * h"  # one undo step
        s = stats(nvim)
        assert s["shown"] == 1 and s["accepted"] == 1 and s["n"] >= 2
    finally:
        nvim.close()


def test_dismiss_and_the_cursor_wandering_off_clear_it(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    fake = FakeNextEditModel("zeta2")
    nvim = session(nvim_bin, manifest, nvim_env, fake.url, tmp_path)
    try:
        rename_parameter(nvim)
        wait_for(lambda: marks(nvim), what="a next edit drawn")
        assert lua(nvim, "require('local_copilot').next_edit_dismiss()") is True
        assert marks(nvim) == [] and screen_lines(nvim)[1] == "    return w * h"
        assert lua(nvim, "require('local_copilot').next_edit_dismiss()") is False
        assert lua(nvim, "require('local_copilot').next_edit_accept()") is False
        wait_for(lambda: stats(nvim)["dismissed"] == 1)
        lua(nvim, "require('local_copilot').next_edit_request()")
        wait_for(lambda: marks(nvim), what="asked for on demand")
        nvim.api.win_set_cursor(0, [4, 0])  # away from the cursor's row and the edit
        wait_for(lambda: marks(nvim) == [], what="cleared when the cursor wandered off")
        assert buffer_text(nvim) == "def area(width, h):\n    return w * h\n\nprint(area(2, 3))"
    finally:
        nvim.close()
        fake.close()


def test_a_stale_answer_is_never_drawn_and_a_change_clears_a_shown_one(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    fake = FakeNextEditModel("sweep", delay=0.8)
    nvim = session(nvim_bin, manifest, nvim_env, fake.url, tmp_path)
    try:
        rename_parameter(nvim)
        wait_for(lambda: fake.prompts, what="the request")
        nvim.input("A # area<Esc>")  # the buffer changes while the answer is on its way
        wait_for(lambda: len(fake.prompts) >= 2, what="the request after the change")
        wait_for(lambda: marks(nvim), what="the newer answer drawn", timeout=10)
        assert nvim.current.buffer[0] == "def area(width, h): # area"
        shown = stats(nvim)["shown"]
        assert shown == 1  # the first answer was for a buffer that no longer exists
        nvim.input("x")  # a change under the shown edit clears it
        wait_for(lambda: marks(nvim) == [], what="cleared by the change")
    finally:
        nvim.close()
        fake.close()


def test_a_cut_answer_shows_nothing(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    fake = FakeNextEditModel("zeta")
    fake.cut = True
    nvim = session(nvim_bin, manifest, nvim_env, fake.url, tmp_path)
    try:
        rename_parameter(nvim)
        # the region is all there but its last characters: shown, it would delete them
        wait_for(lambda: stats(nvim)["quiet"] == 1, what="the answer judged")
        assert stats(nvim)["failed"] == 0
        assert marks(nvim) == []
        assert nvim.current.buffer[1] == "    return w * h"
    finally:
        nvim.close()
        fake.close()


def test_edits_in_private_files_never_reach_the_prompt(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    fake = FakeNextEditModel("zeta2")
    nvim = session(nvim_bin, manifest, nvim_env, fake.url, tmp_path, name=".env")
    try:
        nvim.api.win_set_cursor(0, [1, 9])
        nvim.input("ciwSECRETNAME<Esc>")
        wait_for(lambda: "SECRETNAME" in nvim.current.buffer[0])
        (tmp_path / "util.py").write_text("RATE = 1\n")
        nvim.command(f"edit {tmp_path / 'util.py'}")
        nvim.input("A0<Esc>")  # an edit in another file: the history is across buffers
        (tmp_path / "calc.py").write_text("\n".join(TEXT) + "\n")
        nvim.command(f"edit {tmp_path / 'calc.py'}")
        rename_parameter(nvim)
        wait_for(lambda: any("+def area(width, h):" in p for p in fake.prompts), what="a request from calc.py")
        assert all("SECRETNAME" not in p and ".env" not in p for p in fake.prompts)
        prompt = fake.prompts[-1]
        assert "--- a/util.py\n+++ b/util.py\n@@ -1 +1 @@\n-RATE = 1\n+RATE = 10" in prompt
        assert prompt.index("util.py") < prompt.index("+def area(width, h):")  # oldest first
    finally:
        nvim.close()
        fake.close()


def test_server_down_is_one_message_and_no_edit(nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
                                                tmp_path: Path) -> None:
    fake = FakeNextEditModel("sweep")
    url = fake.url
    fake.close()  # nothing listens there now
    nvim = session(nvim_bin, manifest, nvim_env, url, tmp_path, format="sweep")
    try:
        rename_parameter(nvim)
        wait_for(lambda: stats(nvim)["failed"] >= 1, what="the failure counted")
        assert nvim.api.get_mode() == {"mode": "n", "blocking": False}  # no hit-enter prompt
        nvim.input("A # x")
        # ghost text asks the same server in Insert mode, and fails too
        wait_for(lambda: lua(nvim, "require('local_copilot').status()") == "backend down", what="ghost text failed")
        nvim.input("<Esc>")
        wait_for(lambda: stats(nvim)["failed"] >= 2, what="the second failure counted")
        assert nvim.api.get_mode() == {"mode": "n", "blocking": False}
        messages = nvim.exec_lua("return vim.fn.execute('messages')")
        # one episode of one server: one message, naming it
        ours = [ln for ln in messages.splitlines() if "local-copilot" in ln]
        assert len(ours) == 1 and ours[0].startswith("local-copilot: next edit: llama.cpp: cannot"), messages
        assert "Traceback" not in messages
        assert marks(nvim) == []
    finally:
        nvim.close()


def health_section(nvim: Any) -> list[dict[str, Any]]:
    sections = nvim.exec_lua("return vim.fn.LocalCopilotCall('health', require('local_copilot.config').user)")
    return next(s["items"] for s in sections if s["name"] == "next edits")


def test_checkhealth_sends_a_known_case_and_says_the_answer_parses(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    fake = FakeNextEditModel("zeta2")
    nvim = session(nvim_bin, manifest, nvim_env, fake.url, tmp_path, ui=False)
    try:
        items = health_section(nvim)
        assert "next edits use backend llama.cpp" in items[0]["message"]
        assert items[-1]["level"] == "ok", items
        assert "zeta2 format, detected" in items[-1]["message"] and "the answer parses" in items[-1]["message"]
    finally:
        nvim.close()
        fake.close()


def test_a_next_edit_model_beside_the_fim_model(nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
                                                 llama_server: Any, tmp_path: Path) -> None:
    """Plumbing with a real llama-server: the project's tiny model (it writes "x" forever) as the
    next-edit backend beside the ghost-text one. Its answer never ends, so the size cap stops
    it and nothing is shown; checkhealth says so."""
    fim = FakeNextEditModel("sweep")  # the ghost-text backend: not asked for next edits
    opts = {"backends": {"llama.cpp": {"url": fim.url}, "nes": {"kind": "llama.cpp", "url": llama_server.url}},
            "next_edit": {"enabled": True, "debounce_ms": 20, "backend": "nes", "format": "sweep", "n_predict": 16}}
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup=opts)
    try:
        (tmp_path / "calc.py").write_text("\n".join(TEXT) + "\n")
        nvim.command(f"cd {tmp_path}")
        nvim.command(f"edit {tmp_path / 'calc.py'}")
        rename_parameter(nvim)
        wait_for(lambda: stats(nvim)["quiet"] == 1, what="the real server's answer, cut at the size cap")
        s = stats(nvim)
        assert s["requests"] == 1 and s["failed"] == 0 and s["shown"] == 0 and s["n"] == 1
        assert fim.prompts == []
        assert marks(nvim) == [] and nvim.current.buffer[1] == "    return w * h"
        status = nvim.exec_lua("return vim.fn.LocalCopilotCall('backend_status')")
        assert status["backend"] == "llama.cpp"  # the ghost text stays with its own backend
        assert status["next_edit"] == {"backend": "nes", "url": llama_server.url, "format": "sweep",
                                       "server": "not managed"}
        items = health_section(nvim)
        assert "next edits use backend nes (llama.cpp at " + llama_server.url in items[0]["message"]
        assert "did not end within next_edit.n_predict = 16 tokens" in items[-1]["message"]
    finally:
        nvim.close()
        fim.close()


def test_tab_keymap_jumps_applies_and_falls_back(nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
                                                 tmp_path: Path) -> None:
    fake = FakeNextEditModel("zeta")
    opts = {"backends": {"llama.cpp": {"url": fake.url}}, "keymaps": {"next_edit_accept": "<Tab>"},
            "next_edit": {"enabled": True, "debounce_ms": 20}}
    nvim = start_nvim(nvim_bin, manifest, nvim_env)
    try:
        nvim.command("nnoremap <Tab> <Cmd>let g:tab_before = get(g:, 'tab_before', 0) + 1<CR>")
        nvim.exec_lua("require('local_copilot').setup(...)", opts)
        (tmp_path / "calc.py").write_text("\n".join(TEXT) + "\n")
        nvim.command(f"cd {tmp_path}")
        nvim.command("edit calc.py")
        nvim.input("<Tab>")  # nothing shown: the earlier mapping runs
        wait_for(lambda: nvim.vars.get("tab_before") == 1, what="the fallback")
        rename_parameter(nvim)
        wait_for(lambda: marks(nvim), what="a next edit drawn")
        nvim.input("<Tab>")
        wait_for(lambda: tuple(nvim.current.window.cursor) == (2, 12), what="the jump")
        nvim.input("<Tab>")
        wait_for(lambda: nvim.current.buffer[1] == "    return width * h", what="applied")
        assert nvim.vars.get("tab_before") == 1
    finally:
        nvim.close()
        fake.close()


def test_inserted_text_takes_the_buffers_syntax_highlighting(
        nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    """Lua has a Tree-sitter parser in every Neovim: the inserted text is drawn with its
    highlight groups over LocalCopilotNextEditAdd."""
    fake = FakeNextEditModel("zeta2")
    opts = {"backends": {"llama.cpp": {"url": fake.url}}, "next_edit": {"enabled": True, "debounce_ms": 20}}
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup=opts)
    try:
        (tmp_path / "area.lua").write_text("local function area(w, h)\n  return w * h\nend\n")
        nvim.command(f"cd {tmp_path}")
        nvim.command("edit area.lua")
        nvim.api.win_set_cursor(0, [1, 20])
        nvim.input("ciwwidth<Esc>")
        wait_for(lambda: marks(nvim), what="a next edit drawn")
        (inserted,) = [m for m in marks(nvim) if m[3].get("virt_text_pos") == "inline"]
        assert (inserted[1], inserted[2]) == (1, 10)  # after "  return w"
        [(text, groups)] = inserted[3]["virt_text"]
        assert text == "idth"
        assert groups[0] == "LocalCopilotNextEditAdd" and groups[1].startswith("@variable")
    finally:
        nvim.close()
        fake.close()


def test_a_multi_line_edit_is_drawn_and_applied_as_one_undo_step(nvim_bin: str, manifest: Path,
                                                                 nvim_env: dict[str, str], tmp_path: Path) -> None:
    """The plan as the host sends it (updates.NextEditPlan): `return w * h` becomes three
    rows; the deleted `w` is highlighted, the rows it becomes are virtual lines below it."""
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={"next_edit": {"enabled": True}})
    try:
        attach_ui(nvim)
        nvim.current.buffer[:] = TEXT
        nvim.api.win_set_cursor(0, [2, 11])
        lua(nvim, "require('local_copilot.next_edit')._seq_for_test(vim.api.nvim_get_current_buf(), 7)")
        plan = {"buf": nvim.current.buffer.number, "tick": nvim.current.buffer.vars["changedtick"], "seq": 7,
                "cursor": [1, 11], "row": 1, "col": 11, "end_row": 1, "end_col": 12,
                "text": "width\n    assert h\n    return width", "old": "w"}
        nvim.exec_lua("require('local_copilot.next_edit').show(...)", plan)
        # the row as it is (its `w` highlighted as deleted), then the rows it becomes below it
        assert screen_lines(nvim)[1:5] == ["    return w * h", "    return width", "    assert h",
                                           "    return width * h"]
        deleted = [m for m in marks(nvim) if m[3].get("hl_group") == "LocalCopilotNextEditDelete"]
        assert [(m[1], m[2], m[3]["end_row"], m[3]["end_col"]) for m in deleted] == [(1, 11, 1, 12)]
        assert lua(nvim, "require('local_copilot').next_edit_accept()") is True
        assert nvim.current.buffer[:] == ["def area(w, h):", "    return width", "    assert h",
                                          "    return width * h", "", "print(area(2, 3))"]
        assert tuple(nvim.current.window.cursor) == (4, 15)
        nvim.command("undo")
        assert nvim.current.buffer[:] == TEXT
    finally:
        nvim.close()


def test_rows_only_inserted_show_above_the_row_they_go_before(nvim_bin: str, manifest: Path,
                                                              nvim_env: dict[str, str]) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={"next_edit": {"enabled": True}})
    try:
        attach_ui(nvim)
        nvim.current.buffer[:] = TEXT
        nvim.api.win_set_cursor(0, [1, 0])
        lua(nvim, "require('local_copilot.next_edit')._seq_for_test(vim.api.nvim_get_current_buf(), 3)")
        plan = {"buf": nvim.current.buffer.number, "tick": nvim.current.buffer.vars["changedtick"], "seq": 3,
                "cursor": [0, 0], "row": 1, "col": 0, "end_row": 1, "end_col": 0, "text": "    assert h > 0\n",
                "old": ""}
        nvim.exec_lua("require('local_copilot.next_edit').show(...)", plan)
        screen = screen_lines(nvim)
        assert screen[0].startswith("def area(w, h):") and "next edit: line 2" in screen[0]
        assert screen[1:3] == ["    assert h > 0", "    return w * h"]
        assert lua(nvim, "require('local_copilot').next_edit_accept()") is True  # the jump
        assert lua(nvim, "require('local_copilot').next_edit_accept()") is True  # applied
        assert nvim.current.buffer[1:3] == ["    assert h > 0", "    return w * h"]
    finally:
        nvim.close()


def test_a_plan_that_does_not_fit_the_buffer_shows_nothing_and_no_error(nvim_bin: str, manifest: Path,
                                                                        nvim_env: dict[str, str]) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={"next_edit": {"enabled": True}})
    try:
        nvim.current.buffer[:] = TEXT
        lua(nvim, "require('local_copilot.next_edit')._seq_for_test(vim.api.nvim_get_current_buf(), 5)")
        plan = {"buf": nvim.current.buffer.number, "tick": nvim.current.buffer.vars["changedtick"], "seq": 5,
                "cursor": [0, 0], "row": 1, "col": 80, "end_row": 9, "end_col": 3, "text": "x", "old": "?"}
        nvim.exec_lua("require('local_copilot.next_edit').show(...)", plan)
        assert marks(nvim) == [] and lua(nvim, "require('local_copilot').next_edit_visible()") is False
        assert "E5108" not in nvim.exec_lua("return vim.fn.execute('messages')")
    finally:
        nvim.close()
