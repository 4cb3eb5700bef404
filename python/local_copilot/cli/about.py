"""Where the `local-copilot` command lives and which options file it reads: said by
`--version`, `--help` and `doctor`, because the build puts the command in the plugin's own
venv (not on PATH) and the command reads a file, not the options Neovim's setup() was given."""

from __future__ import annotations

import os
import shutil
import sys
from importlib import metadata
from pathlib import Path

import platformdirs

from ..health.checks import Item

__all__ = ["command_path", "config_dir", "config_item", "config_origin", "install_item", "version_text", "help_epilog"]

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def config_dir() -> Path:
    return Path(platformdirs.user_config_dir("local-copilot"))


def command_path() -> Path:
    """This command's file: the script that runs it, else the one beside its python (the venv's)."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name.startswith("local-copilot") and argv0.exists():
        return argv0.resolve()
    exe = "local-copilot.exe" if os.name == "nt" else "local-copilot"
    return Path(sys.executable).parent / exe


def on_path(cmd: Path) -> bool:
    found = shutil.which("local-copilot")
    return found is not None and Path(found).resolve() == cmd.resolve()


def version_text() -> str:
    try:
        version = metadata.version("local-copilot-nvim")
    except metadata.PackageNotFoundError:
        version = "(not installed as a package)"
    v = sys.version_info
    return (f"local-copilot {version}\ncommand: {command_path()}\npackage: {PACKAGE_DIR}\n"
            f"python {v.major}.{v.minor}.{v.micro}: {sys.executable}")


def config_origin(arg: str | None, path: Path | None) -> str:
    """Which options file was read, and how it was chosen ('' when none was found)."""
    if path is None:
        return ""
    if arg:
        return f"{path} (--config)"
    if os.environ.get("LOCAL_COPILOT_CONFIG"):
        return f"{path} ($LOCAL_COPILOT_CONFIG)"
    return f"{path} (the user config folder)"


def config_item(arg: str | None, path: Path | None) -> Item:
    """The doctor's first line on its options: the file read, or that none was found."""
    nvim = "Neovim uses the options given to setup() instead (:LocalCopilot doctor checks those)"
    if path is None:
        return Item(level="info", message=(f"no options file: the defaults (looked for --config, $LOCAL_COPILOT_CONFIG, "
                                           f"{config_dir() / 'config.toml'} and config.json)"),
                    advice=[f"write the setup() table as TOML to {config_dir() / 'config.toml'}", nvim])
    return Item(level="info", message=f"options read from {config_origin(arg, path)}", advice=[nvim])


def install_item() -> Item:
    """Where this command is, and whether PATH finds it."""
    cmd = command_path()
    where = f"this command: {cmd} (package {PACKAGE_DIR})"
    if on_path(cmd):
        return Item(level="ok", message=where)
    home_bin = Path.home() / ".local" / "bin"
    return Item(level="info", message=where + "; not on your PATH",
                advice=[f"run it by that path, or link it onto your PATH: ln -s {cmd} {home_bin}/local-copilot"])


def help_epilog() -> str:
    return (f"options: --config FILE, else $LOCAL_COPILOT_CONFIG, else\n  {config_dir() / 'config.toml'} (or config.json):\n"
            "  the same table as setup() takes. Neovim uses setup()'s options, not this file.\n"
            f"this command: {command_path()} (--version says more)")
