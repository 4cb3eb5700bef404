"""The edit recorder (lua/local_copilot/edit_recorder.lua) in a real Neovim: whatever the user does,
the records it hands over, applied in order to the text as it was, give the text as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .nvim_session import start_nvim

pytestmark = pytest.mark.integration

START = [f"line {i} = value_{i}" for i in range(60)]


def replay(lines: list[str], records: list[dict[str, Any]]) -> list[str]:
    out = list(lines)
    for r in records:
        row, old, new = r["row"], r["old"], r["new"]
        assert out[row:row + len(old)] == old, (row, old, out[row:row + len(old)])
        out[row:row + len(old)] = new
    return out


def recorded(nvim: Any, path: Path, keys: str) -> list[dict[str, Any]]:
    """The records of `keys` typed into START, loaded as `path` with the recorder attached."""
    nvim.command(f"edit {path}")
    nvim.current.buffer[:] = START
    nvim.exec_lua("require('local_copilot.edit_recorder').attach(vim.api.nvim_get_current_buf())")
    nvim.input(keys.replace("\n", "<CR>"))
    nvim.command("echo")  # the keys are handled before this
    return nvim.exec_lua("return require('local_copilot.edit_recorder').take()")


@pytest.mark.parametrize("keys", [
    "ggciwfirst<Esc>",  # one word changed
    "5Goinserted a\nand b<Esc>jjdd",  # lines opened, one deleted below
    "10Gdd40Gp",  # a line moved far away (two records)
    "3GA tail<Esc>50GIhead <Esc>3Gx",  # far apart and back
    "20G3dd:%s/value/v/g\n",  # a substitution over the whole buffer
    "uu",  # undo (nothing to undo at first)
    "ggyGGp",  # the buffer pasted after itself
])
def test_records_replay_to_the_buffer(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], keys: str,
                                      tmp_path: Path) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env)
    try:
        records = recorded(nvim, tmp_path / "a.py", keys)
        final = nvim.current.buffer[:]
        assert final != START or keys == "uu"
        assert replay(START, records) == final
        assert all(r["path"] == str(tmp_path / "a.py") for r in records)
        # more changes after a take: the next records start from there
        nvim.input("ggdd")
        nvim.command("echo")
        more = nvim.exec_lua("return require('local_copilot.edit_recorder').take()")
        assert replay(final, more) == nvim.current.buffer[:]
    finally:
        nvim.close()


def test_a_private_buffer_is_never_recorded(nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
                                            tmp_path: Path) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={"next_edit": {"enabled": True}})
    try:
        nvim.command(f"edit {tmp_path / '.env'}")
        nvim.input("iTOKEN=abc<Esc>")
        nvim.command("echo")
        assert nvim.exec_lua("return require('local_copilot.edit_recorder').attached(vim.api.nvim_get_current_buf())") is False
        nvim.command(f"edit {tmp_path / 'a.py'}")
        assert nvim.exec_lua("return require('local_copilot.edit_recorder').attached(vim.api.nvim_get_current_buf())") is True
        assert nvim.exec_lua("return require('local_copilot.edit_recorder').take()") == []
    finally:
        nvim.close()


def test_records_carry_three_unchanged_rows_each_side(nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
                                                      tmp_path: Path) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env)
    try:
        [rec] = recorded(nvim, tmp_path / "a.py", "11Gccchanged<Esc>")
        assert rec["row"] == 10 and rec["old"] == [START[10]] and rec["new"] == ["changed"]
        assert rec["before"] == START[7:10] and rec["after"] == START[11:14]
    finally:
        nvim.close()


def test_detached_then_attached_again_records_each_change_once(nvim_bin: str, manifest: Path,
                                                               nvim_env: dict[str, str], tmp_path: Path) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env)
    try:
        nvim.command(f"edit {tmp_path / 'a.py'}")
        nvim.current.buffer[:] = START
        edits = "require('local_copilot.edit_recorder')"
        nvim.exec_lua(f"{edits}.attach(vim.api.nvim_get_current_buf())")
        nvim.exec_lua(f"{edits}.reset()")  # next edits turned off...
        nvim.exec_lua(f"{edits}.attach(vim.api.nvim_get_current_buf())")  # ...and on again
        nvim.input("5Goone\ntwo<Esc>")
        nvim.command("echo")
        records = nvim.exec_lua(f"return {edits}.take()")
        assert replay(START, records) == nvim.current.buffer[:]
    finally:
        nvim.close()


def test_a_buffer_not_shown_is_let_go_with_its_change_kept(nvim_bin: str, manifest: Path,
                                                           nvim_env: dict[str, str], tmp_path: Path) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={"next_edit": {"enabled": True}})
    edits = "require('local_copilot.edit_recorder')"
    try:
        nvim.command("set hidden")
        nvim.command(f"edit {tmp_path / 'a.py'}")
        nvim.current.buffer[:] = START
        a = nvim.current.buffer.number
        nvim.exec_lua(f"{edits}.take()")
        nvim.input("5Goone<Esc>")
        nvim.command(f"edit {tmp_path / 'b.py'}")  # a.py hidden: its copy is dropped
        assert nvim.exec_lua(f"return {edits}.attached(...)", a) is False
        [rec] = nvim.exec_lua(f"return {edits}.take()")  # ...and the change made there kept
        assert rec["path"].endswith("a.py") and rec["new"] == ["one"]
        nvim.command("buffer " + str(a))  # shown again: recorded again
        assert nvim.exec_lua(f"return {edits}.attached(...)", a) is True
        nvim.command("bunload " + str(nvim.eval("bufnr('b.py')")))
        # at most MAX_BUFFERS at once, however many are shown
        nvim.command("wall | set nohidden")
        for i in range(12):
            nvim.command(f"tabedit {tmp_path / f'f{i}.py'}")
        assert nvim.exec_lua(f"return {edits}.attached_count()") == nvim.exec_lua(f"return {edits}.MAX_BUFFERS")
        nvim.command("tabonly")  # the tabs closed: their buffers unloaded
        assert nvim.exec_lua(f"return {edits}.attached_count()") == 1
    finally:
        nvim.close()


def test_turning_next_edits_off_lets_every_buffer_go(nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
                                                    tmp_path: Path) -> None:
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={"next_edit": {"enabled": True}})
    edits = "require('local_copilot.edit_recorder')"
    try:
        nvim.command(f"edit {tmp_path / 'a.py'}")
        assert nvim.exec_lua(f"return {edits}.attached_count()") == 1
        assert nvim.exec_lua(f"return {edits}.copies_count()") == 1
        # ghost text's recent edits (context.edits, on by default) keep the shown buffer
        # attached, without a copy of its text
        nvim.exec_lua("require('local_copilot').setup({ next_edit = { enabled = false } })")
        assert nvim.exec_lua(f"return {edits}.copies_count()") == 0
        nvim.exec_lua("require('local_copilot').setup({ next_edit = { enabled = false }, context = { edits = false } })")
        assert nvim.exec_lua(f"return {edits}.attached_count()") == 0
    finally:
        nvim.close()
