"""What the model gets and what the user keeps: cross-file context reaches the real
llama-server as input_extra (seen through a recording proxy), and an answer that repeats the
text after the cursor still leaves the right buffer after an accept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..conftest import PHRASE
from ..fakes.recording_proxy import RecordingProxy
from ..helpers import wait_for
from .nvim_session import lua, start_nvim, wait_ghost

pytestmark = pytest.mark.integration


def test_other_buffers_reach_the_server_as_input_extra_but_secrets_never(
    proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path
) -> None:
    helper = tmp_path / "geometry.py"
    helper.write_text("".join(f"def area_{i}(w, h):\n    return w * h * {i}\n" for i in range(20)))
    secret = tmp_path / ".env"
    secret.write_text("API_TOKEN=" + "s3cr3t-" * 8 + "\nOTHER=1\nMORE=2\nLAST=3\n")
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={
        # /infill: the phrase model writes PHRASE after the middle marker (see test_editor.py);
        # the chunks travel as input_extra there, and in the repo-level prompt with /completion
        "backends": {"llama.cpp": {"url": proxy.url, "endpoint": "infill"}}, "debounce_ms": 0, "adaptive_debounce": False,
    })
    try:
        main = tmp_path / "main.py"
        nvim.command(f"edit {main}")
        nvim.current.buffer[:] = ["def f():", "\t"]
        nvim.command("call cursor(2, 1)")
        nvim.input("A")
        wait_ghost(nvim, lambda t: t == PHRASE)  # the host runs now
        nvim.input("<Esc>")
        for path in (helper, secret):
            nvim.command(f"edit {path}")
            nvim.command("normal! 10G")
            nvim.command("normal! yy")  # a yank in the secret file must not leak either
            nvim.command(f"edit {main}")  # leaving it sends a chunk
        nvim.command("call cursor(2, 1)")
        nvim.input("A x")
        wait_for(lambda: any(b.get("input_extra") for b in proxy.bodies("/infill")), what="input_extra sent")
        extra = [b["input_extra"] for b in proxy.bodies("/infill") if b.get("input_extra")][-1]
        assert [c["filename"] for c in extra] == [str(helper)]
        assert "def area_" in extra[0]["text"]
        sent = repr(proxy.requests)
        assert "s3cr3t" not in sent and "API_TOKEN" not in sent
    finally:
        nvim.close()


def test_answer_repeating_the_next_line_is_cut_and_the_accepted_buffer_is_right(
    phrase_server: Any, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path
) -> None:
    # the model writes "run(a, b)\n\tok"; the line after the cursor already says "\tok"
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={
        # /infill: the phrase model writes PHRASE after the middle marker (see test_editor.py)
        "backends": {"llama.cpp": {"url": phrase_server.url, "endpoint": "infill"}}, "debounce_ms": 0, "adaptive_debounce": False,
    })
    try:
        nvim.command(f"edit {tmp_path / 'a.py'}")
        nvim.current.buffer[:] = ["def f():", "\t", "\tok"]
        nvim.command("call cursor(2, 1)")
        nvim.input("A")
        assert wait_ghost(nvim, lambda t: t == "run(a, b)") == "run(a, b)"
        lua(nvim, "require('local_copilot').accept()")
        wait_for(lambda: nvim.current.buffer[:] == ["def f():", "\trun(a, b)", "\tok"], what="accepted once, no repeat")
    finally:
        nvim.close()
