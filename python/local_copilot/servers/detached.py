"""Servers whose launch command hands them to a daemon of their own and returns (LM Studio's
`lms server start`): the command runs to its end, its output in the backend's server log, then
the server is waited for until its health check answers. Such a server is not the plugin's:
nothing supervises, shares or stops it (its own tool does: `lms server stop`)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ServerStartError

__all__ = ["start_detached"]

POLL_S = 0.2


def start_detached(name: str, recipe: Any, env: dict[str, str], log_path: Path, healthy: Callable[[], bool],
                   progress: Callable[[float, str], None] | None, timeout: float) -> None:
    """Run `recipe.argv` to its end, then wait up to `timeout` seconds (both together) for
    `healthy()`. Raises ServerStartError with the command's own words when it fails."""
    t0 = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(log_path, "ab") as log:
        os.chmod(log_path, 0o600)
        try:
            done = subprocess.run(recipe.argv, env={**env, **recipe.env}, stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT, timeout=timeout, check=False)
        except FileNotFoundError:
            raise ServerStartError(f"{name}: {recipe.argv[0]} not found") from None
        except subprocess.TimeoutExpired:
            raise ServerStartError(f"{name}: `{' '.join(recipe.argv[:3])}` did not return within {timeout:.0f}s "
                                   f"(see {log_path})") from None
    if done.returncode != 0:
        said = _last_lines(log_path)
        raise ServerStartError(f"{name}: `{' '.join(recipe.argv[:3])}` failed (exit {done.returncode})"
                               + (f": {said}" if said else "") + f" (full log: {log_path})")
    last = 0.0
    while not healthy():
        now = time.monotonic() - t0
        if now > timeout:
            raise ServerStartError(f"{name}: `{' '.join(recipe.argv[:3])}` returned, but nothing answers at "
                                   f"{recipe.url}{recipe.health_path} after {timeout:.0f}s (see {log_path})")
        if progress is not None and now - last >= 1.0:
            last = now
            progress(now, _last_lines(log_path, 1))
        time.sleep(POLL_S)


def _last_lines(path: Path, n: int = 2) -> str:
    try:
        lines = [x.strip() for x in path.read_text(errors="replace").splitlines()[-n:] if x.strip()]
    except OSError:
        return ""
    return " | ".join(x[:200] for x in lines)
