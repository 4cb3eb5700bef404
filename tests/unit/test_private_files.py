"""Logs private to the user, state directories checked (python/local_copilot/privacy/files.py)."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from local_copilot.errors import ServerStartError
from local_copilot.privacy.files import (
    PrivateRotatingFileHandler,
    check_private_dir,
    open_private,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_logs_are_created_private_and_stay_so_when_rotated(tmp_path: Path) -> None:
    os.umask(0o022)  # the usual umask: files would be world-readable
    path = tmp_path / "local_copilot.log"
    handler = PrivateRotatingFileHandler(path, maxBytes=200, backupCount=2, encoding="utf-8")
    logger = logging.getLogger("test_private_files")
    logger.addHandler(handler)
    try:
        for i in range(20):
            logger.warning("line %d %s", i, "x" * 40)
    finally:
        logger.removeHandler(handler)
        handler.close()
    logs = sorted(tmp_path.glob("local_copilot.log*"))
    assert len(logs) == 3 and all(mode(p) == 0o600 for p in logs), {p.name: oct(mode(p)) for p in logs}


def test_an_existing_world_readable_log_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_text("old\n")
    path.chmod(0o644)
    with open_private(path) as f:
        f.write(b"new\n")
    assert mode(path) == 0o600 and path.read_text() == "old\nnew\n"


def test_a_state_directory_is_made_0700_when_it_is_ours(tmp_path: Path) -> None:
    d = tmp_path / "state"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    assert check_private_dir(d) == d and mode(d) == 0o700
    assert mode(check_private_dir(tmp_path / "new" / "servers")) == 0o700


def test_a_state_directory_that_is_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "state").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ServerStartError, match="not a directory"):
        check_private_dir(tmp_path / "state")


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to make a directory another user's")
def test_a_state_directory_planted_by_another_user_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "local-copilot-0"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)
    with pytest.raises(ServerStartError, match="belongs to uid 65534, not to you"):
        check_private_dir(d)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to make a directory another user's")
def test_server_state_in_tmp_is_not_kept_in_a_directory_another_user_planted(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from local_copilot.servers import directories

    monkeypatch.setattr(directories.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(directories, "_writable_dir", lambda path: False)  # no usable XDG_RUNTIME_DIR
    planted = tmp_path / f"local-copilot-{os.getuid()}"
    (planted / "servers").mkdir(parents=True)
    os.chown(planted, 65534, 65534)
    with pytest.raises(ServerStartError, match="belongs to uid 65534"):
        directories.runtime_dir({})
    os.chown(planted, 0, 0)
    planted.chmod(0o777)
    assert directories.runtime_dir({}) == planted / "servers" and mode(planted) == 0o700
