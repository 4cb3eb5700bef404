"""The CLI's options file: TOML or JSON with the same table as setup() takes."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import platformdirs

from ..errors import ConfigError

__all__ = ["config_file", "read_config_file"]


def config_file(path: str | None) -> Path | None:
    if path:
        return Path(path).expanduser()
    if os.environ.get("LOCAL_COPILOT_CONFIG"):
        return Path(os.environ["LOCAL_COPILOT_CONFIG"]).expanduser()
    base = Path(platformdirs.user_config_dir("local-copilot"))
    for name in ("config.toml", "config.json"):
        if (base / name).is_file():
            return base / name
    return None


def read_config_file(path: Path | None) -> dict[str, Any]:
    """The table in the file at `path`: TOML when its name ends in .toml, else JSON (whatever
    its name says: an error names the format it was read as). Raises ConfigError naming the
    file, and the line where it is not valid."""
    if path is None:
        return {}
    toml = path.suffix == ".toml"
    try:
        text = path.read_text()
        data = tomllib.loads(text) if toml else json.loads(text)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # TOMLDecodeError, JSONDecodeError, UnicodeDecodeError
        form = "TOML" if toml else "JSON" if path.suffix == ".json" else "JSON (a file not named .toml is read as JSON)"
        raise ConfigError(f"config file {path} is not valid {form}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a table at the top")
    return data
