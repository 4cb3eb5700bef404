"""What a server's log says: its last lines, cleaned of llama.cpp's prefixes and of colour
codes, and the lines among them that say what went wrong (the supervisor quotes them when a
server fails to start or dies)."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["tail_lines", "error_quote", "model_failed"]

# lines of a server log that say what went wrong
_ERROR_LINE = re.compile(r"\b(error|failed|failure|exception|fatal|cannot|can't|unable|invalid|"
                         r"not found|no such file|out of memory)\b|^\S*Error\b", re.I)
_MODEL_FAILURE = re.compile(r"failed to load model|error loading model|model loading error|llama_model_load|"
                            r"gguf_init|no such file|does not appear to have|not a valid|can't load|"
                            r"could not load|safetensors|Repo id must|is not a local folder|"
                            r"OSError: .*(model|config)|config\.json|huggingface\.co|model identifier|"
                            r"HTTPLIB failed", re.I)
# llama.cpp prefixes lines with "0.00.006.485 E "; keep the message
_LLAMA_PREFIX = re.compile(r"^\d+\.\d+\.\d+\.\d+ [A-Z] ")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _clean(line: str) -> str:
    line = _ANSI.sub("", line).rstrip()
    return _LLAMA_PREFIX.sub("", line).strip()


def tail_lines(path: Path, n: int = 40, max_bytes: int = 64_000) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read().decode(errors="replace")
    except OSError:
        return []
    lines = [_clean(x) for x in data.splitlines()]
    return [x for x in lines if x][-n:]


def error_quote(lines: list[str], limit: int = 3) -> str:
    """The log lines that say what went wrong: the first error (usually the cause) and the last
    ones (what the server concluded), joined on one line."""
    errors = [x for x in lines if _ERROR_LINE.search(x)]
    if not errors:
        errors = lines[-limit:]
    picked: list[str] = []
    for line in [errors[0], *errors[-(limit - 1):]] if errors else []:
        if line not in picked:
            picked.append(line)
    return " | ".join(x[:240] for x in picked)


def model_failed(lines: list[str]) -> bool:
    """Whether an error among `lines` says the model could not be loaded (a wrong path or id,
    a file that is no model, a download that failed)."""
    return any(_MODEL_FAILURE.search(x) for x in lines if _ERROR_LINE.search(x))
