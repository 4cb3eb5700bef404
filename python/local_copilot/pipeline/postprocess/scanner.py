"""The scan of one line of code: the brackets and quotes it leaves open, the closers that
match nothing in it, and where a line comment starts.  Streamed lines resume their scan
where the last call left it."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from .lines import _WS, _is_word

_QUOTES = "\"'`"
_OPENERS = "([{"
_OPEN_FOR = {")": "(", "]": "[", "}": "{"}
_SIG_RE = re.compile(r"[()\[\]{}\"'`\\#/]")
_STR_PREFIXES = frozenset({"r", "u", "b", "f", "br", "rb", "fr", "rf"})
_BLOCK_OPENERS = (":", "(", "[", "{")


class _Scan(NamedTuple):
    stack: tuple[str, ...]  # open brackets / quote chars, innermost last
    strays: int  # closers that matched nothing
    base: int  # stack depth below which pops are "outer" (close text before the cursor)
    outer: tuple[tuple[int, str], ...]  # (index, char) of outer pops and strays, from `mark` on
    code_end: int  # index where a line comment starts (len(line) if none)


def _hash_comment(line: str, i: int) -> bool:
    # `#` starts a comment unless it is part of a word (`a#b`, `this.#x`) or a
    # Rust attribute / interpolation (`#[`, `#{`).
    if i > 0 and (_is_word(line[i - 1]) or line[i - 1] in ".$"):
        return False
    return not line.startswith(("#[", "#{"), i)


def _slash_comment(line: str, i: int) -> bool:
    # `//` is Python floor division after an operand, a comment after nothing or a
    # statement/block boundary.
    j = i - 1
    while j >= 0 and line[j] in " \t":
        j -= 1
    return j < 0 or line[j] in ";{},"


def _is_apostrophe(line: str, i: int) -> bool:
    # don't, it's, 1'000 - but r'..', b'..', f'..' are string prefixes (<= 2 letters
    # after a non-word char), so looking 3 chars back is enough.
    j = i
    while j > 0 and i - j < 3 and _is_word(line[j - 1]):
        j -= 1
    if j == i:
        return False
    if i - j >= 3 or (j > 0 and _is_word(line[j - 1])):
        return True
    return line[j:i].lower() not in _STR_PREFIXES


class _Resume(NamedTuple):
    """Scanner state after every significant char before the last one of `text`."""

    text: str
    st: tuple[str, ...]
    strays: int
    base: int
    marked: bool
    skip: int
    outer: tuple[tuple[int, str], ...]
    code_end: int  # < len(text): a comment started, the scan is complete
    pos: int


# The streamed partial line grows by a few chars per call; resuming its scan keeps
# a call O(chunk) instead of O(line) (10 KB single-line outputs would go quadratic).
# Results never depend on it: it only skips re-doing identical work.
_RESUME: dict[tuple[tuple[str, ...], int, int, int, str], _Resume] = {}
_RESUME_MIN = 64  # shorter lines are cheaper to rescan than to cache
_RESUME_MAX = 256


def _scan_line(
    line: str,
    stack: tuple[str, ...] = (),
    strays: int = 0,
    base: int = 0,
    mark: int = 0,
) -> _Scan:
    """Bracket/quote scan of one line (comments stop at the line end).

    Pops that go below ``base`` (closing something opened before the cursor) and
    strays are reported in ``outer``; with ``mark`` > 0, ``base`` is taken as the
    depth reached at index ``mark`` and only events from there on are reported.
    """
    n = len(line)
    key = (stack, strays, base, mark, line[:16])
    r = _RESUME.get(key) if n >= _RESUME_MIN else None
    if r is not None and line.startswith(r.text):
        if r.code_end < len(r.text):
            return _Scan(r.st, r.strays, r.base, r.outer, r.code_end)
        st, nstray, bse, marked = list(r.st), r.strays, r.base, r.marked
        skip, outer, pos = r.skip, list(r.outer), r.pos
    else:
        st, nstray, bse, marked = list(stack), strays, base, mark <= 0
        skip, outer, pos = -1, [], 0
    code_end = n
    cp = n - 1 if n >= _RESUME_MIN else -1  # checkpoint: before the first match at >= cp
    for m in _SIG_RE.finditer(line, pos):
        i = m.start()
        if i >= cp >= 0:
            _save(key, line, st, nstray, bse, marked, skip, outer, n, i)
            cp = -1
        if not marked and i >= mark:
            bse, marked = len(st), True
        if i < skip:
            continue
        ch = line[i]
        top = st[-1] if st else ""
        if top and top in _QUOTES:  # inside a string: only the escape and its quote matter
            if ch == "\\":
                skip = i + 2
            elif ch == top:
                st.pop()
                if marked and len(st) < bse:
                    bse = len(st)
                    outer.append((i, ch))
            continue
        if ch == "\\":
            skip = i + 2
        elif ch == "#":
            if _hash_comment(line, i):
                code_end = i
                break
        elif ch == "/":
            if line.startswith("//", i) and _slash_comment(line, i):
                code_end = i
                break
        elif ch in _QUOTES:
            if not (ch == "'" and _is_apostrophe(line, i)):
                st.append(ch)
        elif ch in _OPENERS:
            st.append(ch)
        elif top == _OPEN_FOR[ch]:
            st.pop()
            if marked and len(st) < bse:
                bse = len(st)
                outer.append((i, ch))
        else:
            nstray += 1
            if marked:
                outer.append((i, ch))
    if cp >= 0:  # no match at or after the checkpoint (or a comment ended the scan)
        _save(key, line, st, nstray, bse, marked, skip, outer, code_end if code_end < cp else n, n)
    if not marked:
        bse = len(st)
    return _Scan(tuple(st), nstray, bse, tuple(outer), code_end)


def _save(
    key: tuple[tuple[str, ...], int, int, int, str],
    line: str,
    st: list[str],
    strays: int,
    base: int,
    marked: bool,
    skip: int,
    outer: list[tuple[int, str]],
    code_end: int,
    pos: int,
) -> None:
    if len(_RESUME) >= _RESUME_MAX:
        _RESUME.clear()
    _RESUME[key] = _Resume(line, tuple(st), strays, base, marked, skip, tuple(outer), code_end, pos)


# Complete lines are re-scanned on every streamed call with the same start state. The hits
# come within a few answers (typing key by key, a soak's hit rate is 0.33 at 256 entries and
# 0.35 with no bound): a larger cache only keeps each keystroke's first line (~360 bytes each).
_scan_cached = lru_cache(maxsize=256)(_scan_line)


def _end_state(text: str, entry: tuple[str, ...] = ()) -> tuple[tuple[str, ...], int]:
    sc = _scan_line(text, entry)
    return sc.stack, sc.strays


def _imbalance(state: tuple[tuple[str, ...], int]) -> int:
    """Brackets and quotes left open plus closers that match nothing."""
    return len(state[0]) + state[1]


def _first_outer(prefix: str, text: str) -> tuple[int, str] | None:
    """First closer in `text` (typed after `prefix`) that closes something before it."""
    sc = _scan_line(prefix + text, mark=len(prefix))
    if not sc.outer:
        return None
    i, ch = sc.outer[0]
    return i - len(prefix), ch


# The walks (structure.py) look at up to _WALK_LIMIT lines above the cursor: 1,024 lines
# (~250 bytes each) hold the neighbourhoods of the last places typed at (a soak's hit rate
# 0.75, 0.78 unbounded).
@lru_cache(maxsize=1024)
def _summary(line: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(unmatched closers, unmatched openers) of one line on its own."""
    sc = _scan_line(line)
    if any(c in _QUOTES for c in sc.stack):
        # Ends inside a string: a multi-line string whose brackets are just text.
        return (), ()
    return tuple(c for _, c in sc.outer), sc.stack


def _opens_block(line: str) -> bool:
    sc = _scan_line(line)
    if sc.stack and sc.stack[-1] in _QUOTES:
        return False
    return line[: sc.code_end].rstrip(_WS).endswith(_BLOCK_OPENERS)
