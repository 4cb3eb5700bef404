"""The plugin runs its own Python host (host type local_copilot, its own python): setup() and
the running host leave g:python3_host_prog as the user set it, another plugin's Python remote
plugin keeps Neovim's python3 host with the user's interpreter, and ghost text comes from the
plugin's host, a different process run by the plugin's python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from local_copilot.servers.llama_cpp import LlamaServer

from .nvim_session import REPO, attach_child, wait_ghost

pytestmark = pytest.mark.integration

OTHER_PLUGIN = '''
import os
import sys

import pynvim


@pynvim.plugin
class Other:
    def __init__(self, nvim):
        self.nvim = nvim

    @pynvim.function("OtherPython", sync=True)
    def which(self, args):
        return [os.getpid(), os.environ.get("OTHER_PYTHON_MARK", "")]
'''


def test_other_python_plugins_keep_their_python(nvim_bin: str, nvim_env: dict[str, str], llama_server: LlamaServer,
                                                tmp_path: Path) -> None:
    other = tmp_path / "other.nvim"
    (other / "rplugin" / "python3").mkdir(parents=True)
    (other / "rplugin" / "python3" / "other_plugin.py").write_text(OTHER_PLUGIN)
    # the user's python3 host: a python of their own (marked, so its processes can be told apart)
    users_python = tmp_path / "users-python"
    users_python.write_text(f"#!/bin/sh\nOTHER_PYTHON_MARK=yes exec '{sys.executable}' \"$@\"\n")
    users_python.chmod(0o755)
    manifest = Path(nvim_env["NVIM_RPLUGIN_MANIFEST"])
    head = [nvim_bin, "--clean", "-n", "--cmd", f"set rtp^={REPO}", "--cmd", f"set rtp+={other}",
            "--cmd", f"let g:python3_host_prog = '{users_python}'"]
    subprocess.run([*head, "--headless", "-c", f"let g:loaded_remote_plugins = '{manifest}'", "-c", "UpdateRemotePlugins",
                    "-c", "qa!"], env=nvim_env, capture_output=True, text=True, timeout=120, check=True)
    text = manifest.read_text()
    assert "call remote#host#RegisterPlugin('local_copilot', " in text and "OtherPython" in text, text

    nvim = attach_child([*head, "--embed", "--headless"], nvim_env)
    try:
        nvim.command(f"let g:loaded_remote_plugins = '{manifest}'")
        nvim.command(f"source {manifest}")
        nvim.exec_lua("require('local_copilot').setup(...)", {"backends": {"llama.cpp": {"url": llama_server.url}},
                                                             "debounce_ms": 0})
        (tmp_path / "a.py").write_text("def f():\n")
        nvim.command(f"edit {tmp_path / 'a.py'}")
        nvim.input("Go    return ")
        wait_ghost(nvim, lambda t: t.startswith("xxxx"), timeout=30)
        assert nvim.eval("g:python3_host_prog") == str(users_python)  # as the user set it
        other_pid, mark = nvim.call("OtherPython")
        assert mark == "yes"  # the other plugin runs in the user's python
        ours = nvim.call("jobpid", nvim.call("remote#host#Require", "local_copilot"))
        assert ours != other_pid
        # the plugin's host: its own python (the build's venv here), not the user's
        environ = Path(f"/proc/{ours}/environ").read_bytes().split(b"\0")
        assert b"OTHER_PYTHON_MARK=yes" not in environ
        assert Path(f"/proc/{ours}/cmdline").read_bytes().split(b"\0")[0].decode() == str(REPO / ".venv" / "bin" / "python")
    finally:
        nvim.close()
