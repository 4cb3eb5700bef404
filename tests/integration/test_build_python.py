"""The build says which Python it needs and how to get one when it finds none new enough
(Ubuntu 22.04's python3 is 3.10): the plugin manager's build step (install.lua, in a real
Neovim) and `make venv`. The old python is a stand-in script that answers as Python 3.10 does."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from .nvim_session import REPO

pytestmark = pytest.mark.integration


def old_python(folder: Path) -> Path:
    """`python3` that is Python 3.10.12: its version, and a failing exit for anything else."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "python3"
    # (sys.exit(version_info < (3, 11)) exits 1 on 3.10; print(... version_info[:3]) prints it)
    exe.write_text("#!/bin/sh\n"
                   "case \"$*\" in *sys.exit*) exit 1;; *version_info*) echo 3.10.12; exit 0;;"
                   " --version) echo 'Python 3.10.12'; exit 0;; esac\n"
                   "exit 1\n")
    exe.chmod(0o755)
    return exe


def test_the_build_says_which_python_it_needs_and_how_to_get_one(nvim_bin: str, tmp_path: Path) -> None:
    # a plugin folder without a .venv: the build has to make one
    plugin = tmp_path / "plugin"
    shutil.copytree(REPO / "lua", plugin / "lua")
    exe = old_python(tmp_path / "bin")
    done = subprocess.run(
        [nvim_bin, "--clean", "--headless", "-n", "--cmd", f"set rtp^={plugin}",
         "-c", "lua local ok, err = pcall(require('local_copilot.install').build); io.stdout:write(tostring(err))",
         "-c", "qa!"],
        env={"PATH": str(tmp_path / "bin"), "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=120,
        check=False)
    assert done.stdout == (
        f"local-copilot build: needs Python 3.11 or newer; found python3 3.10.12 ({exe}). To fix: get one with "
        "`uv python install 3.12`, then build with it: vim.g.local_copilot_build_python = "
        "vim.fn.trim(vim.fn.system('uv python find 3.12')); or install your system's python3.12 package, or one from "
        "https://www.python.org/downloads/; then run the build again"), done.stdout + done.stderr
    assert not (plugin / ".venv").exists()


def test_make_venv_says_which_python_it_needs(tmp_path: Path) -> None:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    exe = old_python(tmp_path / "bin")
    done = subprocess.run(["make", "venv", f"PYTHON={exe}"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode != 0
    assert done.stderr.splitlines()[:3] == [
        f"make venv: needs Python 3.11 or newer; {exe} is Python 3.10.12.",
        '  Get one: uv python install 3.12, then: make PYTHON="$(uv python find 3.12)"',
        "  (or your system's python3.12 package, or https://www.python.org/downloads/)"]
    assert not (tmp_path / ".venv").exists()
