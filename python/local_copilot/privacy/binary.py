"""Binary files: no text to send (git's rule)."""

from __future__ import annotations

import codecs
import re

__all__ = ["BINARY_HEAD", "binary_reason"]

BINARY_HEAD = 8000  # bytes of a file git reads to tell binary from text (buffer.c, FIRST_FEW_BYTES)
# encodings whose text holds NUL bytes: for these only the decoding tells text from binary
_WIDE = re.compile(r"(?:utf-?16|utf-?32|ucs-?2|ucs-?4)", re.IGNORECASE)


def binary_reason(head: bytes, encoding: str = "utf-8", *, more: bool = False) -> str | None:
    """Why a file whose first bytes are `head` (the first BINARY_HEAD, `more` when the file goes
    on) is binary, or None, by git's rule: a NUL byte among them, or text that is not valid in
    the file's `encoding` (a sequence cut at the end of `head` is not held against it)."""
    head = head[:BINARY_HEAD]
    if not _WIDE.match(encoding) and b"\0" in head:
        return f"a binary file (a NUL byte in its first {BINARY_HEAD} bytes)"
    try:
        codecs.getincrementaldecoder(encoding)().decode(head, final=not more)
    except LookupError:
        return None  # an encoding Python does not know: the editor read it, leave it be
    except UnicodeDecodeError:
        return f"a binary file (not valid {encoding})"
    return None
