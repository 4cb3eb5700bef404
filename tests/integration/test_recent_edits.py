"""Recent edits at other places as context for ghost text (lua/local_copilot/recent_edits.lua,
prompt/recent_edits.py), in a real headless Neovim with the real llama-server behind a
recording proxy: the user edits a line of another file (or far up the same file), then types
elsewhere; what the server received holds the edited text under its file's name, newest
first; with `context.edits` off it does not, nor an edit of a file the project ignores, nor
one of a buffer wiped since.

The other file holds two lines, too few for the ring of other buffers' chunks (prompt/ring.py
takes three or more): what reaches the server of it came as an edit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ..conftest import PHRASE
from ..fakes.recording_proxy import RecordingProxy
from ..helpers import wait_for
from .nvim_session import start_nvim, wait_ghost
from .test_context_sources import make_project

pytestmark = pytest.mark.integration

EDITED = "def resize_box(box, by):"
FIRST = PHRASE.split("\n")[0]


def _open(nvim_bin: str, manifest: Path, nvim_env: dict[str, str], proxy: RecordingProxy, **options: Any) -> Any:
    return start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backends": {"llama.cpp": {"url": proxy.url, "endpoint": "infill"}}, "debounce_ms": 0,
        "adaptive_debounce": False, **options})


def _chunks(proxy: RecordingProxy) -> list[dict[str, str]]:
    return [c for b in proxy.bodies("/infill") for c in b.get("input_extra", [])]


def _edit_other_then_type(nvim: Any, other: Path, main: Path) -> None:
    """A line added to `other` in Insert mode, then Insert mode at the end of main.py's call."""
    other.write_text("UNIT = 1\n")
    nvim.command(f"edit {other}")
    nvim.input(f"o{EDITED}<Esc>")
    nvim.command("echo")  # the keys are handled before this
    nvim.command(f"edit {main}")
    nvim.command("call cursor(4, 1)")
    nvim.input("A")
    wait_ghost(nvim, lambda t: t.startswith(FIRST))  # the host runs and answered


def _more_requests(nvim: Any, proxy: RecordingProxy, keys: str = "pq") -> None:
    """A request for each of `keys` reached the server (events before them were handled)."""
    for key in keys:
        sent = len(proxy.bodies("/infill"))
        nvim.input(key)
        wait_for(lambda: len(proxy.bodies("/infill")) > sent, what="a request after the key")


@pytest.mark.parametrize("next_edits", [False, True])  # (on: the recorder keeps a copy of each buffer)
def test_a_line_edited_in_another_file_reaches_the_server_under_its_name_until_its_buffer_is_wiped(
        next_edits: bool, proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
        tmp_path: Path) -> None:
    main = make_project(tmp_path)
    nvim = _open(nvim_bin, manifest, nvim_env, proxy, next_edit={"enabled": next_edits})
    try:
        _edit_other_then_type(nvim, tmp_path / "shapes.py", main)

        def both() -> list[str] | None:
            nvim.input("p")  # one more key: a request of its own (the imports are read off it)
            for body in proxy.bodies("/infill"):
                names = [c["filename"] for c in body.get("input_extra", [])]
                if "shapes.py" in names and "geometry.py" in names:
                    return names
            return None
        names = wait_for(both, interval=0.3, what="the edit and the imported signatures sent")
        # after the imported file's signatures (they name what the code at the cursor calls)
        assert names.index("geometry.py") < names.index("shapes.py") and names.count("shapes.py") == 1
        # the new line with the unchanged row above it, under the file's name in its project
        assert {"filename": "shapes.py", "text": f"UNIT = 1\n{EDITED}\n"} in _chunks(proxy)

        nvim.input("<Esc>")
        nvim.command(f"bwipeout! {tmp_path / 'shapes.py'}")
        nvim.command("call cursor(4, 1)")
        nvim.input("A")
        _more_requests(nvim, proxy)
        assert EDITED not in json.dumps(proxy.bodies("/infill")[-1])
    finally:
        nvim.close()


def _long_main(tmp_path: Path, nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
               proxy: RecordingProxy) -> tuple[Path, Any]:
    """main.py of 86 lines and a Neovim whose window shows 20 of them: an edit at the top is
    out of the window when the cursor is at the end."""
    main = make_project(tmp_path)
    filler = "".join(f"step_{i} = {i}\n" for i in range(80))
    main.write_text(f"UNIT = 1\n\n{filler}near = 2\n\ntotal = scale(\n")
    return main, _open(nvim_bin, manifest, nvim_env, proxy, context={"lines_before": 20})


def test_an_edit_far_up_the_same_file_is_sent_and_one_the_window_shows_is_not(
        proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    main, nvim = _long_main(tmp_path, nvim_bin, manifest, nvim_env, proxy)
    try:
        nvim.command(f"edit {main}")
        nvim.input(f"ggo{EDITED}<Esc>")  # far up: out of the 20 lines the window shows
        nvim.command("call cursor(line('$') - 2, 1)")
        nvim.input("Anear_edit = 3<Esc>")  # near: the window shows it
        nvim.command("call cursor(line('$'), 1)")
        nvim.input("A")
        wait_ghost(nvim, lambda t: t.startswith(FIRST))

        def sent() -> bool:
            nvim.input("x")
            return any(EDITED in c["text"] for c in _chunks(proxy))
        wait_for(sent, interval=0.3, what="the far edit sent")
        assert {"filename": "main.py", "text": f"UNIT = 1\n{EDITED}\n\nstep_0 = 0\nstep_1 = 1\n"} in _chunks(proxy)
        # (the ring's chunks are named by their whole path: prompt/ring.py)
        assert not any("near_edit" in c["text"] for c in _chunks(proxy) if c["filename"] == "main.py")
    finally:
        nvim.close()


@pytest.mark.parametrize("case", ["option off", "ignored file"])
def test_no_edit_is_sent_with_the_option_off_or_from_an_ignored_file(
        case: str, proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
        tmp_path: Path) -> None:
    off = case == "option off"
    main = make_project(tmp_path, ignore="" if off else "private.py\n")
    nvim = _open(nvim_bin, manifest, nvim_env, proxy, **({"context": {"edits": False}} if off else {}))
    try:
        _edit_other_then_type(nvim, tmp_path / ("shapes.py" if off else "private.py"), main)
        _more_requests(nvim, proxy)
        # Lua sent the ignored file's edit (it does not know the project's ignore file); the host refused it
        assert nvim.exec_lua("return package.loaded['local_copilot.recent_edits'] ~= nil") is not off
        assert nvim.exec_lua("return #require('local_copilot.recent_edits')._waiting()") == 0
        assert EDITED not in json.dumps(proxy.requests)
        assert "resize_box" not in json.dumps(proxy.requests)
    finally:
        nvim.close()


def test_an_edit_finished_before_the_cursor_rests_reaches_the_warm_up(
        proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    # the warm-up evaluates the new place's prompt while the cursor rests; an edit sent only at
    # InsertEnter would change that prompt's start after it, and the first key there would have
    # the server evaluate the window again
    main, nvim = _long_main(tmp_path, nvim_bin, manifest, nvim_env, proxy)
    try:
        nvim.command(f"edit {main}")
        nvim.command("call cursor(line('$'), 1)")
        nvim.input("A")
        wait_ghost(nvim, lambda t: t.startswith(FIRST))  # the host runs (a warm-up never starts it)
        nvim.input(f"<Esc>ggo{EDITED}<Esc>")  # far up: out of the 20 lines the window shows
        wait_for(lambda: nvim.api.get_mode()["mode"] == "n", what="Normal mode")
        sent = len(proxy.bodies("/infill"))
        nvim.input("G")  # the cursor rests at the end: a warm-up there

        def warm_up() -> dict[str, Any] | None:
            return next((b for b in proxy.bodies("/infill")[sent:] if b.get("n_predict") == 0), None)

        body = wait_for(warm_up, what="the warm-up's request")
        assert any(EDITED in c["text"] and c["filename"] == "main.py" for c in body.get("input_extra", []))
    finally:
        nvim.close()
