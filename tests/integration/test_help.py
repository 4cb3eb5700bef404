"""doc/local_copilot.txt as `:help` reads it: :helptags takes it without an error, and every
|link| in it leads to a tag, the plugin's own or Neovim's."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .nvim_session import REPO

pytestmark = pytest.mark.integration

HELP = REPO / "doc" / "local_copilot.txt"


def _nvim(nvim_bin: str, *cmds: str) -> subprocess.CompletedProcess[str]:
    argv = [nvim_bin, "--clean", "--headless"]
    for cmd in (*cmds, "qa!"):
        argv += ["-c", cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_helptags_accepts_the_help_file(nvim_bin: str, tmp_path: Path) -> None:
    shutil.copy(HELP, tmp_path / HELP.name)
    res = _nvim(nvim_bin, f"helptags {tmp_path}")
    assert res.returncode == 0 and "E1" not in res.stderr + res.stdout, res.stderr + res.stdout  # E154: duplicate tag
    assert "local-copilot-complete\t" in (tmp_path / "tags").read_text()


def test_every_link_leads_to_a_tag(nvim_bin: str, tmp_path: Path) -> None:
    runtime = _nvim(nvim_bin, "lua io.stdout:write(vim.env.VIMRUNTIME)").stdout.strip()
    known = {line.split("\t", 1)[0] for line in (Path(runtime) / "doc" / "tags").read_text().splitlines()}
    text = HELP.read_text()
    own = set(re.findall(r"\*([^*\s]+)\*", text))
    # a link is |name| outside code (`...`) and examples (lines indented after a > marker)
    prose = re.sub(r"`[^`\n]*`", "", text)
    links = set(re.findall(r"\|([^|\s]+)\|", prose))
    assert not links - own - known, sorted(links - own - known)
