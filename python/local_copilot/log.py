"""The plugin's log file, under platformdirs' user log dir. Buffer text is logged only at debug."""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

import platformdirs

from .privacy.files import PrivateRotatingFileHandler

__all__ = ["log", "log_path", "setup_logging"]

log = logging.getLogger("local_copilot")

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}


def log_path() -> Path:
    base = os.environ.get("LOCAL_COPILOT_LOG_DIR") or platformdirs.user_log_dir("local-copilot")
    return Path(base) / "local_copilot.log"


def setup_logging(level: str = "warn") -> Path:
    path = log_path()
    if not any(isinstance(h, logging.handlers.RotatingFileHandler) for h in log.handlers):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # private to the user (0600): paths, server messages and, at debug, buffer text go there
        handler = PrivateRotatingFileHandler(path, maxBytes=2_000_000, backupCount=2, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(LEVELS.get(level, logging.WARNING))
    return path
