"""Files and directories only their user may read: state directories (checked: owner, kind,
mode), logs created 0600. On a shared machine another user must neither read the plugin's
logs nor plant state that stop/restart would act on."""

from __future__ import annotations

import contextlib
import logging.handlers
import os
import stat
from pathlib import Path
from typing import IO, Any

from ..errors import ServerStartError

__all__ = ["PrivateRotatingFileHandler", "check_private_dir", "open_private"]


def check_private_dir(path: Path, *, create: bool = True) -> Path:
    """`path` as a directory of this user's, mode 0700 (made so, or tightened when it is ours);
    ServerStartError when it is a link, not a directory, or another user's."""
    if create:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ServerStartError(f"{path} is not a directory (a link or a file): refusing to keep server state there; "
                               "set XDG_RUNTIME_DIR or LOCAL_COPILOT_RUNTIME_DIR")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise ServerStartError(f"{path} belongs to uid {st.st_uid}, not to you: refusing to keep server state "
                               "there; set XDG_RUNTIME_DIR or LOCAL_COPILOT_RUNTIME_DIR")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def open_private(path: Path | str, mode: str = "ab") -> IO[Any]:
    """open(path, mode) for appending or writing, creating the file 0600 (and making an
    existing one so)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o600)
    if "b" in mode:
        return os.fdopen(fd, mode)
    return os.fdopen(fd, mode, encoding="utf-8")


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A RotatingFileHandler whose files (the first and each rotated one) are 0600."""

    def _open(self) -> Any:
        return open_private(self.baseFilename, "a" if "a" in self.mode else "w")
