"""Which options each surface checks and where the command lives, as the user reads it:
`:LocalCopilot doctor` in Neovim checks the options given to setup() (a config.toml beside
them is not read there); `local-copilot doctor` names the file it read (or that it found
none) and where the command is; `--version` and `--help` say the same."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from local_copilot.servers.ports import free_port

from .nvim_session import REPO

pytestmark = pytest.mark.integration


def cli(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "local-copilot"), *args], capture_output=True, text=True,
                          timeout=120, env=env, check=False, cwd=cwd)


def user_env(tmp_path: Path) -> dict[str, str]:
    """No $LOCAL_COPILOT_CONFIG; the user config folder under tmp_path; PATH without the venv."""
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_COPILOT_CONFIG"}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), PYTHONPATH=str(REPO / "python"), PATH="/usr/bin:/bin")
    return env


def test_neovims_doctor_checks_the_options_in_force_not_the_file(open_nvim: Any, nvim_env: dict[str, str]) -> None:
    in_force, in_file = free_port(), free_port()
    folder = Path(nvim_env["XDG_CONFIG_HOME"]) / "local-copilot"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(f'[backends."llama.cpp"]\nurl = "http://127.0.0.1:{in_file}"\n')
    nvim = open_nvim({"backends": {"llama.cpp": {"url": f"http://127.0.0.1:{in_force}"}}})
    nvim.command("LocalCopilot doctor")
    lines = list(nvim.current.buffer[:])
    text = "\n".join(lines)
    assert nvim.eval("&filetype") == "checkhealth", text
    assert ("- options in force: the ones given to setup() in this Neovim (a config.toml is read by the local-copilot "
            "command only)") in lines, text
    assert f"- ✅ OK options valid; active backend 'llama.cpp' at http://127.0.0.1:{in_force}" in lines, text
    assert str(in_file) not in text


def test_the_cli_doctor_names_the_file_it_read_and_where_it_is(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    cmd = Path(sys.executable).parent / "local-copilot"
    none = cli("doctor", "--url", f"http://127.0.0.1:{free_port()}", env=env).stdout.splitlines()
    folder = tmp_path / "config" / "local-copilot"
    assert (f"  INFO   no options file: the defaults (looked for --config, $LOCAL_COPILOT_CONFIG, "
            f"{folder / 'config.toml'} and config.json)") in none
    assert f"         - write the setup() table as TOML to {folder / 'config.toml'}" in none
    assert "         - Neovim uses the options given to setup() instead (:LocalCopilot doctor checks those)" in none
    assert f"  INFO   this command: {cmd} (package {REPO / 'python' / 'local_copilot'}); not on your PATH" in none
    assert f"         - run it by that path, or link it onto your PATH: ln -s {cmd} {Path.home()}/.local/bin/local-copilot" \
        in none
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text("n_predict = 32\n")
    found = cli("doctor", "--url", f"http://127.0.0.1:{free_port()}", env=env).stdout.splitlines()
    assert f"  INFO   options read from {folder / 'config.toml'} (the user config folder)" in found
    given = tmp_path / "mine.json"
    given.write_text("{}")
    named = cli("doctor", "--config", str(given), "--url", f"http://127.0.0.1:{free_port()}", env=env).stdout
    assert f"  INFO   options read from {given} (--config)\n" in named
    # on PATH: said as OK, with no advice to link it
    on_path = cli("doctor", "--url", f"http://127.0.0.1:{free_port()}",
                  env=dict(env, PATH=f"{cmd.parent}:/usr/bin:/bin")).stdout.splitlines()
    assert f"  OK     this command: {cmd} (package {REPO / 'python' / 'local_copilot'})" in on_path


def test_version_and_help_say_where_and_what_is_read(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    cmd = Path(sys.executable).parent / "local-copilot"
    version = cli("--version", env=env)
    assert version.returncode == 0
    lines = version.stdout.splitlines()
    assert lines[0].startswith("local-copilot 0.") and lines[1:] == [
        f"command: {cmd}", f"package: {REPO / 'python' / 'local_copilot'}",
        f"python {sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}: {sys.executable}"]
    help_text = cli("--help", env=env).stdout
    assert ("options: --config FILE, else $LOCAL_COPILOT_CONFIG, else\n"
            f"  {tmp_path / 'config' / 'local-copilot' / 'config.toml'} (or config.json):\n"
            "  the same table as setup() takes. Neovim uses setup()'s options, not this file.\n"
            f"this command: {cmd} (--version says more)") in help_text
