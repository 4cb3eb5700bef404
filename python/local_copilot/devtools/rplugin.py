"""Register the remote plugin the way a user does (`:UpdateRemotePlugins`), into a manifest
of our own; for the tests, the demo and the benchmarks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["RegistrationError", "register_rplugin"]

REPO = Path(__file__).resolve().parents[3]


class RegistrationError(RuntimeError):
    pass


def register_rplugin(nvim: str, manifest: Path, python: str = sys.executable) -> Path:
    """Write `manifest` with this checkout's plugin registered, `python` running its host for
    the registration (g:local_copilot_python)."""
    manifest.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [nvim, "--clean", "--headless", "-n",
         "--cmd", f"set rtp^={REPO}",
         "--cmd", f"let g:local_copilot_python = '{python}'",
         # with --clean, g:loaded_remote_plugins stays a placeholder path; it is where
         # :UpdateRemotePlugins writes, so point it at our manifest once startup is done
         "-c", f"let g:loaded_remote_plugins = '{manifest}'",
         "-c", "UpdateRemotePlugins", "-c", "qa!"],
        env=dict(os.environ, NVIM_RPLUGIN_MANIFEST=str(manifest)), capture_output=True, text=True, timeout=120,
    )
    text = manifest.read_text() if manifest.exists() else ""
    if "LocalCopilotEvent" not in text:
        raise RegistrationError(f":UpdateRemotePlugins did not register the plugin:\n{proc.stdout}{proc.stderr}{text}")
    return manifest
