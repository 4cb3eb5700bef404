"""Where accept-word and accept-line stop, as byte offsets into the suggestion's UTF-8 text.

Python decides these once per plan; Lua, which keeps the suggestion on screen, only slices.
"""

from __future__ import annotations

import re

__all__ = ["word_stops"]

# a word: optional leading whitespace, then a run of word characters or a run of one
# punctuation kind; a newline is a stop of its own so accept-word never swallows lines
_WORD = re.compile(r"[ \t]*(?:\w+|[^\w\s]+|\n)|[ \t]+$", re.UNICODE)


def word_stops(text: str) -> list[int]:
    stops: list[int] = []
    pos_bytes = 0
    for m in _WORD.finditer(text):
        pos_bytes += len(m.group(0).encode("utf-8", "surrogateescape"))
        if stops and stops[-1] == pos_bytes:
            continue
        stops.append(pos_bytes)
    total = len(text.encode("utf-8", "surrogateescape"))
    if not stops or stops[-1] != total:
        stops.append(total)
    return stops
