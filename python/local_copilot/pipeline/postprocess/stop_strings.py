"""Stage 1: the answer ends at the first stop string (the served model's FIM special
tokens)."""

from __future__ import annotations

from collections.abc import Sequence


def cut_stop_strings(raw: str, stop_strings: Sequence[str], *, final: bool) -> tuple[str, bool]:
    """Cut at the first stop string; returns (text, found).

    While streaming, a tail that could still grow into a stop string is held back.
    """
    cut = -1
    for s in stop_strings if any(map(raw.__contains__, stop_strings)) else ():  # (the common case: none)
        if s:
            i = raw.find(s)
            if i >= 0 and (cut < 0 or i < cut):
                cut = i
    if cut >= 0:
        return raw[:cut], True
    if final:
        return raw, False
    hold = 0
    for s in stop_strings:
        for k in range(min(len(s) - 1, len(raw)), hold, -1):
            if raw.endswith(s[:k]):
                hold = k
                break
    return (raw[:-hold] if hold else raw), False
