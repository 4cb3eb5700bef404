"""Turn a raw (streamed) FIM completion into the ghost text to show at the cursor.

The engine calls :func:`process` on every streamed chunk with the accumulated raw
text.  The pipeline is pure and deterministic and never shows text that a later
call takes back: while streaming (``final=False``) anything that a later chunk
could still turn into a cut (a partial stop string, a partial repeat of the text
after the cursor, a line that may turn out to duplicate the next existing line,
trailing whitespace, ...) is held back, and every cut that *is* decided is one the
final call makes too.

Stages (each a small function below, composed by :func:`process`):

1. :func:`cut_stop_strings` - cut at the first stop string (the served model's FIM
   special tokens), and at another family's special token (foreign_tokens.py).
2. :func:`keep_first_line` - mid-line completions (text after the cursor) stay on
   one line.
3. :func:`drop_suffix_repeat` / :func:`existing_line_cut` - drop the part that
   repeats the text after the cursor, and stop where the output starts repeating
   the following existing lines.
4. :func:`drop_duplicate_closer` / :func:`closer_cut` - a closing bracket or quote
   that already exists (autopairs, or the next line) is not inserted twice; a
   bracket stack keeps closers that belong to brackets the completion opened.
5. :func:`block_indent` / :func:`leaves_block` - stop when a later line dedents
   out of the block the cursor is in.
6. :func:`repeat_cut` - stop at a loop (a line 3 times in a row, or a block of
   lines twice), keeping the first occurrence.
7. :func:`finish` - trim trailing blank lines / whitespace, cap at ``max_lines``.
8. whitespace-only completions become ``''`` (also in :func:`finish`), and so do
   completions that only repeat the line above (:func:`only_repeats`) or the text
   after the cursor (:func:`drop_suffix_repeat` cuts all of it): nothing to show.
9. a suggestion holding an invisible or format character that the text around the
   cursor does not use is not shown (invisible_chars.py).

Everything works on Python ``str`` (code points): tabs, CJK and emoji need no
special casing, and no byte offsets are used anywhere.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from typing import NamedTuple

import msgspec

from ..chat_answer import chat_code
from ..foreign_tokens import cut_foreign_tokens
from ..invisible_chars import hidden_char
from ...transport.limits import MAX_SUGGESTION_CHARS, unsafe_char

__all__ = [
    "PostContext",
    "Result",
    "block_indent",
    "closer_cut",
    "cut_stop_strings",
    "drop_duplicate_closer",
    "drop_suffix_repeat",
    "existing_line_cut",
    "finish",
    "only_repeats",
    "indent_width",
    "keep_first_line",
    "leaves_block",
    "process",
    "repeat_cut",
    "repeat_holdback",
]


class PostContext(msgspec.Struct, frozen=True):
    line_prefix: str  # current line text before the cursor
    line_suffix: str  # current line text after the cursor
    next_lines: tuple[str, ...]  # lines below the cursor line (a window, may be empty)
    prev_lines: tuple[str, ...] = ()  # lines above the cursor line, nearest last
    tabstop: int = 8
    max_lines: int = 16  # cap on suggestion lines (the cursor line counts as one)
    stop_strings: tuple[str, ...] = ()  # cut the output at the first one
    filetype: str = ""  # the buffer's ('</s>' is a tag in markup, another family's token elsewhere)
    # the answer is a chat model's (prompt style 'chat'): its wrappers go first (chat_answer.py)
    chat: bool = False
    # spaces typed at the cursor that the prompt left out (prompt/prepare.py, the continue
    # style): the answer starts with them, and they are in the buffer already
    heal: str = ""


class Result(msgspec.Struct, frozen=True):
    text: str  # what to show/insert at the cursor ('' = nothing to show)
    done: bool  # the rest of the stream is not wanted (caller cancels)


# ASCII whitespace only: U+3000 and friends are content in CJK text, not padding.
_WS = " \t\r\n\f\v"
_QUOTES = "\"'`"
_OPENERS = "([{"
_OPEN_FOR = {")": "(", "]": "[", "}": "{"}
_SIG_RE = re.compile(r"[()\[\]{}\"'`\\#/]")
_STR_PREFIXES = frozenset({"r", "u", "b", "f", "br", "rb", "fr", "rf"})
_BLOCK_OPENERS = (":", "(", "[", "{")
# C preprocessor conditionals sit at column 0 inside blocks: their indentation ends nothing
# (a #define or #include there more often starts what follows the block)
_PREPROC_RE = re.compile(r"#\s*(?:if|ifdef|ifndef|elif|else|endif)\b")
_MAX_PERIOD = 8  # longest repeated block looked for (lines)
_WALK_LIMIT = 64  # how far back we look for the start of the cursor's statement


# --------------------------------------------------------------------------- helpers


def _rstrip(s: str) -> str:
    return s.rstrip(_WS)


def _is_blank(line: str) -> bool:
    return not line.strip(_WS)


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def indent_width(line: str, tabstop: int = 8) -> int:
    """Display width of the leading spaces/tabs (tabs expanded to ``tabstop``)."""
    lead = line[: len(line) - len(line.lstrip(" \t"))]
    return len(lead.expandtabs(tabstop)) if "\t" in lead else len(lead)


def _norm(line: str, tabstop: int) -> str:
    # Lines are compared with tabs expanded and trailing whitespace ignored.
    return _rstrip(line.expandtabs(tabstop) if "\t" in line else line)


def _first_nonblank(lines: Sequence[str]) -> str | None:
    for line in lines:
        if not _is_blank(line):
            return line
    return None


# --------------------------------------------------------------------------- scanner


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


def _entry_stack(ctx: PostContext) -> tuple[str, ...]:
    """The quote the cursor line starts inside: the line closes a triple-quoted string
    that the lines above opened (a docstring's last line), else nothing.

    Both must agree: an odd count of that triple quote above (the window may start inside
    a string, so the count alone is no proof) and the line reading better balanced from
    inside the string than from outside it.
    """
    line = ctx.line_prefix + ctx.line_suffix
    for tq in ('"""', "'''"):
        if tq in line and sum(s.count(tq) for s in ctx.prev_lines) % 2:
            inside = (tq[0],)
            if _imbalance(_end_state(line, inside)) < _imbalance(_end_state(line)):
                return inside
    return ()


def _in_block_comment(ctx: PostContext, fulls: Sequence[str]) -> bool:
    """Whether the kept text ends inside a ``/* */`` comment (the nearest opener above
    is not closed yet)."""
    for line in itertools.chain(reversed(fulls), reversed(ctx.prev_lines[-_WALK_LIMIT:])):
        o, c = line.rfind("/*"), line.rfind("*/")
        if o >= 0 or c >= 0:
            return o > c
    return False


def _continues_below(ctx: PostContext) -> bool:
    """Whether the cursor's statement goes on below, so its line may end with brackets
    open: the next non-blank line closes brackets opened above it, or is indented deeper
    while the cursor line opens no block (``:`` or ``{`` at its end)."""
    nxt = _first_nonblank(ctx.next_lines)
    if nxt is None:
        return False
    if _summary(nxt)[0]:
        return True
    line = ctx.line_prefix + ctx.line_suffix
    ts = ctx.tabstop
    return indent_width(nxt, ts) > indent_width(line, ts) and not _rstrip(line).endswith((":", "{"))


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


# The walks look at up to _WALK_LIMIT lines above the cursor: 1,024 lines (~250 bytes each)
# hold the neighbourhoods of the last places typed at (a soak's hit rate 0.75, 0.78 unbounded).
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


class _Opener(NamedTuple):
    char: str
    indent: int  # indentation of the line holding the bracket
    unclosed_on_line: int  # brackets of that line still open at the cursor


# `line` changes on every key, so few calls repeat (a soak's hit rate is 0.04 at any size);
# each entry holds a window of lines above the cursor, kept small.
@lru_cache(maxsize=16)
def _walk_back(
    prev: tuple[str, ...], line: str, tabstop: int
) -> tuple[int | None, _Opener | None]:
    """Statement indent of `line` and the innermost bracket enclosing it.

    Walks up the previous lines matching `line`'s unmatched closers to the lines
    that opened them and following backslash continuations (the statement start),
    then on to the first less-indented line (the block header) looking for a
    bracket still open at `line`.  Returns ``None`` for the indent when the
    statement start is out of sight or the brackets do not match up: callers then
    assume nothing.
    """
    return _walk_back_from(prev, _summary(line)[0], indent_width(line, tabstop), tabstop)


# While the user types, `line` changes on every key and `prev` (the same tuple) does not; the
# walk depends on `line` only through its unmatched closers and its indent. Memoized, a key
# costs a lookup instead of the walk's ~90 lines of Python. Each entry holds a window of
# lines: 16 hit as often as 64 (a soak's hit rate 0.86 either way).
@lru_cache(maxsize=16)
def _walk_back_from(
    prev: tuple[str, ...], closers: tuple[str, ...], lo: int, tabstop: int
) -> tuple[int | None, _Opener | None]:
    pending = list(closers)
    own = bool(pending)  # still resolving `line`'s own statement
    top = len(prev)  # earliest line known to belong to the statement
    enc: _Opener | None = None
    for j in range(len(prev) - 1, max(-1, len(prev) - 1 - _WALK_LIMIT), -1):
        pl = prev[j]
        if _is_blank(pl):
            continue
        cont = j == top - 1 and _rstrip(pl).endswith("\\")
        closers, openers = _summary(pl)
        ind = indent_width(pl, tabstop)
        was_pending = bool(pending)
        ops = list(openers)
        while ops and pending:
            if _OPEN_FOR[pending.pop(0)] != ops.pop():
                return (None if own else lo), None
        if (own and was_pending) or cont:
            lo, top = min(lo, ind), j
        if ops and enc is None:  # still open at `line`: the innermost enclosing bracket
            enc = _Opener(ops[-1], ind, len(ops))
        pending = list(closers) + pending
        if own and not pending:
            own = False
        if not own and (enc is not None or (not pending and ind < lo)):
            return lo, enc
    return (None if own else lo), enc


# --------------------------------------------------------------------------- stage 1


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


# --------------------------------------------------------------------------- stage 2


def keep_first_line(text: str) -> tuple[str, bool]:
    """(first line, whether a newline ended it)."""
    i = text.find("\n")
    return (text, False) if i < 0 else (text[:i], True)


# --------------------------------------------------------------------------- stages 3+4 (cursor line)


def _suffix_forms(suffix: str) -> tuple[str, str]:
    s_r = _rstrip(suffix)
    return s_r, s_r.lstrip(" \t")


def _overlap_starts(lr: str, s_r: str, s_l: str, *, growing: bool = False) -> Iterator[int]:
    """Ascending p where ``lr[p:]`` is a prefix of the suffix (as is, or without
    its leading blanks) and p does not split a word.

    A split word is no objection when the tail is the whole rest of the line
    (``brea|ens=True,`` answered ``k_on_hyphens=True,``: the cursor and the end of
    the middle are both inside words).  With `growing` (a streamed line that may
    still become that whole tail) every prefix of the suffix counts.
    """
    if not s_l:
        return
    lo = max(0, len(lr) - len(s_r))
    heads = {s_r[0], s_l[0]}
    p = lo
    while p < len(lr):
        # jump to the next place where a tail can start (the suffix's first char)
        nxt = [i for i in (lr.find(h, p) for h in heads) if i >= 0]
        if not nxt:
            return
        p = min(nxt)
        t = lr[p:]
        if (s_r.startswith(t) or s_l.startswith(t)) and (
            not (p > 0 and _is_word(lr[p - 1]) and _is_word(t[0])) or growing or t in (s_r, s_l)
        ):
            yield p
        p += 1


def drop_suffix_repeat(line: str, ctx: PostContext) -> str | None:
    """`line` without a tail that repeats (a prefix of) the text after the cursor.

    ``None`` when there is no such tail.  The cut must not leave the line's
    brackets and quotes less balanced than inserting the whole `line` would (so
    ``bar(1)`` before ``)`` keeps its own ``)``, while ``(x)`` before ``)`` after
    ``append`` loses its second one); it must not split a word unless the tail is
    the whole rest of the line, and a lone word character is too weak a signal.
    """
    s_r, s_l = _suffix_forms(ctx.line_suffix)
    lr = _rstrip(line)
    pre, suf = ctx.line_prefix, ctx.line_suffix
    e0: tuple[tuple[str, ...], int] | None = None
    whole = 0
    entry: tuple[str, ...] = ()
    for p in _overlap_starts(lr, s_r, s_l):
        t = lr[p:]
        if not (t in (s_r, s_l) or len(t) >= 3 or not _is_word(t[0])):
            continue
        if e0 is None:
            entry = _entry_stack(ctx)
            e0 = _end_state(pre + suf, entry)
            w_state = _end_state(pre + line + suf, entry)
            whole = _imbalance(w_state)
        cut = _end_state(pre + line[:p] + suf, entry)
        c_imb = _imbalance(cut)
        if c_imb > whole and not _continues_below(ctx):
            # all of it closes what the cut would leave open (`(list|):` + `, tuple)`), and
            # the statement ends on this line
            continue
        # as balanced as the line without the insertion, as with all of it (the tail has no
        # bracket of its own: a call the middle opens goes on below), or better balanced than
        # with all of it: the tail's closers and quotes are the ones already after the cursor
        if cut == e0 or cut == w_state or c_imb < whole or c_imb == 0:
            return line[:p]
    return None


def drop_duplicate_closer(line: str, ctx: PostContext) -> str:
    """Don't insert a closer the line already has after the cursor (autopairs).

    If inserting `line` unbalances the line and its first closer of an outer
    bracket/quote is the one the text after the cursor closes first, the existing
    closer does that job: cut there.  ``foo(|)`` + ``bar) {`` -> ``bar``, while
    ``g(x))`` keeps ``g(x)`` (the first ``)`` closes the new ``(``).
    """
    pre, suf = ctx.line_prefix, ctx.line_suffix
    whole = _end_state(pre + line + suf)
    if whole == _end_state(pre + suf):
        return line  # balanced as it is (e.g. '"a", "b' inside ["|"])
    q = _first_outer(pre, line)
    s = _first_outer(pre, suf)
    # unless the cut leaves the line less balanced than all of it: a quote that closes the
    # string the prefix opened, before a suffix that opens another, is not a duplicate
    if (q is not None and s is not None and q[1] == s[1]
            and _imbalance(_end_state(pre + line[: q[0]] + suf)) <= _imbalance(whole)):
        return line[: q[0]]
    return line


def _mid_line_hold(line: str, ctx: PostContext) -> int:
    """While streaming: index from which the partial cursor line may still be cut."""
    h = len(line)
    q = _first_outer(ctx.line_prefix, line)
    if q is not None:
        s = _first_outer(ctx.line_prefix, ctx.line_suffix)
        if s is not None and s[1] == q[1]:
            h = q[0]
    s_r, s_l = _suffix_forms(ctx.line_suffix)
    return next(_overlap_starts(_rstrip(line[:h]), s_r, s_l, growing=True), h)


def _padded_closer(text: str, closer: str) -> bool:
    """Whether the bracket that `closer` closes is followed by a blank in `text`, the
    line up to the suggestion's end (the line's style pads its brackets: ``{ force = true }``;
    after a typed ``{`` the suggestion's own first blank shows that style)."""
    i = text.rfind(_OPEN_FOR.get(closer, "\0"))
    return i >= 0 and text[i + 1 : i + 2] == " "


def _mid_line_final(line: str, ctx: PostContext) -> str:
    out = drop_suffix_repeat(line, ctx)
    if out is None:
        out = drop_duplicate_closer(line, ctx)
    suf = ctx.line_suffix
    # Keep a space that separates the insertion from a following word/operand, and one
    # before a closer whose bracket the line pads on the inside.
    if not suf or suf[0] in _WS or suf[0] in ")]}>,;:.":
        pad = out.endswith(" ") and not out.endswith("  ") and _padded_closer(ctx.line_prefix + out, suf[:1])
        out = _rstrip(out) + (" " if pad and out.strip() else "")
    return out if out.strip() else ""


# --------------------------------------------------------------------------- stage 3 (next lines)


def existing_line_cut(lines: Sequence[str], ctx: PostContext) -> int | None:
    """Index of the first completion line equal to the next existing non-blank line.

    ``lines[0]`` is the whole cursor line; it only counts when the cursor line was
    blank (a fresh line that duplicates the one below).  Lines are compared with
    tabs expanded and trailing whitespace ignored, but with their indentation: a
    ``}`` or ``return x`` at another depth is a different statement.
    """
    nxt = _first_nonblank(ctx.next_lines)
    if nxt is None:
        return None
    target = _norm(nxt, ctx.tabstop)
    for k, line in enumerate(lines):
        if k == 0 and not _is_blank(ctx.line_prefix):
            continue
        if not _is_blank(line) and _norm(line, ctx.tabstop) == target:
            return k
    return None


# --------------------------------------------------------------------------- stage 4 (next lines)


def _cursor_opener(ctx: PostContext) -> _Opener | None:
    """The innermost bracket open at the cursor, if we can tell."""
    pre = ctx.line_prefix
    sc = _scan_line(pre)
    if sc.code_end < len(pre) or (sc.stack and sc.stack[-1] in _QUOTES):
        return None
    if sc.stack:
        return _Opener(sc.stack[-1], indent_width(pre, ctx.tabstop), len(sc.stack))
    return _walk_back(ctx.prev_lines, pre, ctx.tabstop)[1]


def closer_cut(closer: str, ctx: PostContext) -> bool:
    """Whether a closer the completion emits for a bracket open at the cursor is
    already there at the start of the next existing line.

    Only when that line is aligned with the bracket's line and the bracket is the
    only one that line leaves open - otherwise the existing closer may belong to
    an outer bracket and the completion's one is needed.
    """
    if closer not in _OPEN_FOR:
        return False
    nxt = _first_nonblank(ctx.next_lines)
    if nxt is None or not nxt.lstrip(" \t").startswith(closer):
        return False
    o1 = _cursor_opener(ctx)
    return (
        o1 is not None
        and o1.char == _OPEN_FOR[closer]
        and o1.unclosed_on_line == 1
        and o1.indent == indent_width(nxt, ctx.tabstop)
    )


# --------------------------------------------------------------------------- stage 5


def block_indent(ctx: PostContext, cursor_line: str) -> int:
    """Smallest indentation a later line may have and still be in the cursor's block.

    `cursor_line` is the whole cursor line (prefix + completion's first line).  A
    line ending with ``:`` ``{`` ``(`` ``[`` opens a block: its statement's indent
    + 1.  Otherwise the statement's indent (a line that closes brackets opened
    above belongs to the statement that opened them).  A blank cursor line takes
    the block from the line above.  Every uncertainty lowers the result: a lower
    bound never cuts real code.
    """
    ts = ctx.tabstop
    if _is_blank(cursor_line):
        prev = ctx.prev_lines
        j = len(prev) - 1
        while j >= 0 and _is_blank(prev[j]):
            j -= 1
        if j < 0:
            return 0
        stmt = _walk_back(prev[:j], prev[j], ts)[0]
        base = 0 if stmt is None else stmt
        if _opens_block(prev[j]):
            return base + 1
        return min(indent_width(cursor_line, ts), base)
    stmt = _walk_back(ctx.prev_lines, cursor_line, ts)[0]
    base = 0 if stmt is None else stmt
    return base + 1 if _opens_block(cursor_line) else base


def leaves_block(line: str, stack: Sequence[str], block: int, tabstop: int,
                 in_comment: Callable[[], bool] = lambda: False) -> bool:
    """A non-blank line indented less than the block: the suggestion has left it.

    `stack` holds the brackets/quotes opened on the cursor line or in the
    completion that are still open where `line` starts.  Exempt: a line that
    closes the innermost of them (``}`` / ``)`` at the parent indent in C/JS or
    black-style Python), a line inside a string (its indent is text), and a
    preprocessor conditional (column 0 inside blocks) unless it sits inside a
    ``/* */`` comment (`in_comment`, asked only then), where it is no directive.
    """
    if _is_blank(line) or indent_width(line, tabstop) >= block:
        return False
    if _PREPROC_RE.match(line) and not in_comment():
        return False
    if stack:
        top = stack[-1]
        if top in _QUOTES:
            return False
        body = line.lstrip(" \t")
        if body[:1] in _OPEN_FOR and _OPEN_FOR[body[0]] == top:
            return False
    return True


_DOCSTRING_RE = re.compile(r"[rRuUbBfF]{0,2}(?:\"\"\"|''')")


def _leaves_string(line: str, stack: Sequence[str], block: int, fulls: Sequence[str], prefix_len: int,
                   tabstop: int) -> bool:
    """A line inside a triple-quoted string, left of both the block and the string's own
    line, where the string is a docstring or was opened by the completion: the next
    ``def`` or statement, not the string's text.

    A string the user opened before the cursor may hold text at any indentation: the user
    is writing that text.  One the completion opened ends the suggestion there instead;
    the next request, with the opener before the cursor, continues its text uncut.
    """
    if not stack or stack[-1] not in _QUOTES or _is_blank(line):
        return False
    ind = indent_width(line, tabstop)
    if ind >= block:
        return False
    for j in range(len(fulls) - 1, -1, -1):
        full = fulls[j]
        if '"""' in full or "'''" in full:
            if ind >= indent_width(full, tabstop):
                return False
            if _DOCSTRING_RE.match(full.lstrip(" \t")):
                return True
            opened = full[prefix_len:] if j == 0 else full
            return '"""' in opened or "'''" in opened
    return False


# --------------------------------------------------------------------------- stage 6


def _nonblank_idx(norm: Sequence[str]) -> list[int]:
    return [i for i, s in enumerate(norm) if s.strip(_WS)]


def repeat_cut(lines: Sequence[str], start: int = 0) -> int | None:
    """Index where a loop's second occurrence starts (keep everything before).

    A loop is the same non-blank line 3 times in a row (blank lines between are
    ignored; twice happens in real code) or a block of 2-8 lines, with at least
    two non-blank lines, twice back to back.  Only loops ending at or after line
    `start` are looked for (the caller knows there is none before).
    """
    if len(lines) < 3:  # neither a line 3 times nor a block twice fits
        return None
    norm = [_rstrip(s) for s in lines]
    n = len(norm)
    best: int | None = None
    nb = _nonblank_idx(norm)
    for a in range(len(nb) - 2):
        if nb[a + 2] >= start and norm[nb[a]] == norm[nb[a + 1]] == norm[nb[a + 2]]:
            best = nb[a + 1]
            break
    for c in range(max(2, start - _MAX_PERIOD + 1), n if best is None else best):
        for p in range(2, min(_MAX_PERIOD, c) + 1):
            if c + p > n:
                break
            if norm[c] != norm[c - p]:  # cheap reject before slicing
                continue
            blk = norm[c - p : c]
            if blk == norm[c : c + p] and sum(1 for s in blk if s) >= 2:
                return c
    return best


def _cut_off_loop(lines: Sequence[str]) -> int | None:
    """Index of a loop's second line when the answer ends in its third, cut off part-way (the
    server's token limit): a line twice, then a start of it.  ``None`` otherwise."""
    norm = [_rstrip(s) for s in lines]
    nb = _nonblank_idx(norm)
    if len(nb) < 3:
        return None
    a, b, c = nb[-3:]
    if norm[a] == norm[b] and norm[b].startswith(norm[c]) and norm[c] != norm[b]:
        return b
    return None


def repeat_holdback(lines: Sequence[str], partial: str | None = None) -> int:
    """While streaming: index from which complete lines may still turn out to be a
    loop's second occurrence (so they are not shown yet).

    `partial` is the line being written after them: once it cannot be the next
    line of a pattern, that pattern is off.
    """
    norm = [_rstrip(s) for s in lines]
    part = None if partial is None else _rstrip(partial)

    def may_continue(expected: str, skip_blank: bool) -> bool:
        if part is None or (skip_blank and not part):
            return True
        return expected.startswith(part)

    n = len(norm)
    h = n
    nb = _nonblank_idx(norm)
    if len(nb) >= 2 and norm[nb[-1]] == norm[nb[-2]] and may_continue(norm[nb[-1]], True):
        h = nb[-1]
    for p in range(2, _MAX_PERIOD + 1):
        for m in range(p - 1, 0, -1):
            c = n - m
            if c - p < 0 or c >= h or norm[c] != norm[c - p]:
                continue
            blk = norm[c - p : c]
            if norm[c:] == blk[:m] and sum(1 for s in blk if s) >= 2 and may_continue(blk[m], False):
                h = c
                break
    return h


# --------------------------------------------------------------------------- stage 7+8


def finish(lines: Sequence[str], max_lines: int) -> str:
    """Join, cap at `max_lines` lines, trim trailing blank lines/whitespace; a
    whitespace-only result is ''."""
    text = _rstrip("\n".join(lines[: max(1, max_lines)]))
    return text if text.strip() else ""


# --------------------------------------------------------------------------- composition


def _reindent_first(prefix: str, lines: Sequence[str], ts: int, complete: bool) -> str | None:
    """Drop indentation the model repeated after an already indented blank prefix.

    E.g. prefix ``"    "`` and output ``"    a = 1\\n    b = 2"``: the next line
    shows the model meant column 4 for both.  ``None`` = undecided yet.
    """
    l0 = lines[0]
    if not prefix or not _is_blank(prefix) or _is_blank(l0) or l0[0] not in " \t":
        return l0
    w = indent_width(prefix, ts)
    for line in lines[1:]:
        if not _is_blank(line):
            if indent_width(line, ts) == w and not _opens_block(prefix + l0):
                return l0.lstrip(" \t")
            return l0
    return l0 if complete else None


def _above_prefix(partial: str, ctx: PostContext) -> bool:
    """Whether a partial line 0 on a blank cursor line may still become the line above."""
    above = _line_above(ctx)
    return above is not None and _norm(above, ctx.tabstop).startswith(_norm(partial, ctx.tabstop))


def _recent_prefix(partial: str, full: Sequence[str]) -> bool:
    """Whether the partial line may still become the start of a loop: a repeat of
    the last non-blank line or of a line up to a block period back."""
    p = _rstrip(partial)
    recent = [s for s in full[-_MAX_PERIOD:] if not _is_blank(s)]
    last = next((s for s in reversed(full) if not _is_blank(s)), None)
    if last is not None:
        recent.append(last)
    return any(_rstrip(s).startswith(p) for s in recent)


def _line_above(ctx: PostContext) -> str | None:
    return next((s for s in reversed(ctx.prev_lines) if not _is_blank(s)), None)


def only_repeats(kept: Sequence[str], fulls: Sequence[str], ctx: PostContext) -> bool:
    """Whether the suggestion adds nothing but copies of the line above each of its lines.

    `kept` are the suggestion's lines, `fulls` the same as whole lines (line 0 with the
    prefix).  A suggestion that changes the cursor line after typed text adds something;
    on a blank cursor line, line 0 is compared with the nearest non-blank line above.
    Lines are compared with their indentation (tabs expanded, trailing blanks ignored).
    Such a suggestion is shown as nothing: accepting it would only duplicate a line.
    """
    ts = ctx.tabstop
    if not _is_blank(ctx.line_prefix):
        if not kept or not _is_blank(kept[0]):
            return False
        above: str | None = ctx.line_prefix
    else:
        above = _line_above(ctx)
    added = False
    for line in fulls:
        if _is_blank(line):
            continue
        if above is None or _norm(line, ts) != _norm(above, ts):
            return False
        added = True
    return added


class _Loop(NamedTuple):
    """State of the line loop after the complete lines `lines` (none of them cut)."""

    lines: tuple[str, ...]
    kept: tuple[str, ...]
    fulls: tuple[str, ...]
    stack: tuple[str, ...]
    strays: int
    base: int
    outer_seen: bool
    block: int
    rep_clear: int  # repeat_cut found no loop within fulls[:rep_clear]


# Per-context memo of the line loop: each streamed call only processes the lines
# that completed since the last one, so a call stays cheap even with a large
# max_lines.  Like _RESUME it never changes a result.  Keyed by the context object
# (a stream's calls share it; the entry holds it, so its id is not reused): hashing
# a context hashes every line around the cursor, on every keystroke's answer.
_LOOPS: dict[int, tuple[PostContext, _Loop]] = {}
_LOOPS_MAX = 32


def _multi_line(text: str, ctx: PostContext, final: bool) -> Result:
    ts = ctx.tabstop
    prefix = ctx.line_prefix
    max_lines = max(1, ctx.max_lines)
    parts = text.split("\n", max_lines)
    done = False
    if len(parts) > max_lines:  # the cap is reached: nothing after it matters
        parts = parts[:max_lines]
        final = done = True
    n_complete = len(parts) if final else len(parts) - 1

    l0 = _reindent_first(prefix, parts, ts, final)
    if l0 is None:
        return Result("", False)
    parts[0] = l0
    full0 = prefix + l0

    nxt = _first_nonblank(ctx.next_lines)
    nxt_norm = _norm(nxt, ts) if nxt is not None else None
    check0 = _is_blank(prefix) and not _is_blank(l0)

    block: int | None  # None: not taken yet (see below)
    entry = _LOOPS.get(id(ctx))
    memo = entry[1] if entry is not None and entry[0] is ctx else None
    if memo is not None and (
        len(memo.lines) > n_complete or tuple(parts[: len(memo.lines)]) != memo.lines
    ):
        memo = None
    if memo is not None:
        start, rep_clear = len(memo.lines), memo.rep_clear
        kept, fulls = list(memo.kept), list(memo.fulls)
        stack, strays, base = memo.stack, memo.strays, memo.base
        outer_seen, block = memo.outer_seen, memo.block
    else:
        start = rep_clear = 0
        kept = []
        fulls = []  # kept lines as whole lines (line 0 with the prefix)
        stack, strays, base = (), 0, 0  # line 0's scan sets them
        outer_seen, block = False, 0
    held = False
    m = start  # complete lines processed without a cut
    for k in range(start, len(parts)):
        line = parts[k]
        partial = k >= n_complete
        whole = full0 if k == 0 else line
        # stage 3: the output starts repeating the existing next line
        if nxt_norm is not None and (k > 0 or check0) and not _is_blank(whole):
            w = _norm(whole, ts)
            if partial and nxt_norm.startswith(w):
                held = True
                break
            if not partial and w == nxt_norm:
                done = True
                break
        # stage 5: dedent out of the cursor's block
        if k > 0:
            if partial and _is_blank(line):
                break  # nothing to show yet, indentation unknown
            if block is None:
                block = block_indent(ctx, full0)
            if leaves_block(line, stack, block, ts, lambda: _in_block_comment(ctx, fulls)):
                if partial and line.lstrip(" \t").startswith("#"):
                    held = True  # may still become a preprocessor conditional, which stays
                    break
                done = True
                break
            if _leaves_string(line, stack, block, fulls, len(prefix), ts):
                done = True
                break
        if partial and (_recent_prefix(whole, fulls) or (k == 0 and check0 and _above_prefix(whole, ctx))):
            held = True
            break  # may still become a repeat of a recent line (or of the line above)
        # stage 4: a closer that the next existing line already has
        scan = _scan_line if partial else _scan_cached
        if k == 0:
            # one scan of the whole line reporting from the cursor on (a scan of the prefix
            # first cost as much again per keystroke); after a line comment that starts
            # before the cursor it stops there, reporting nothing: the completion is text
            sc = scan(full0, (), 0, 0, len(prefix))
            offs = len(prefix)
        else:
            sc = scan(line, stack, strays, base)
            offs = 0
        if sc.outer and not outer_seen:
            outer_seen = True
            i, ch = sc.outer[0]
            if closer_cut(ch, ctx):
                done = True
                prev_full = next((f for f in reversed(fulls) if not _is_blank(f)), None)
                if prev_full is not None and _rstrip(prev_full) == _rstrip(whole):
                    break  # a looping line, not a last line missing its closer: drop it
                kept.append(line[: i - offs])
                fulls.append(whole[:i])
                break
        kept.append(line)
        fulls.append(whole)
        stack, strays, base = sc.stack, sc.strays, sc.base
        if k == 0 and not partial:
            # the cursor's block, taken when a second line needs it: most suggestions while
            # typing are one line, and the walk up the lines above is most of their cost
            block = None
        if not partial:
            m = k + 1
            saved = (stack, strays, base, outer_seen, block)

    decided = final or done
    if decided:
        cut = repeat_cut(fulls, rep_clear)
        if cut is None and final and not done:
            cut = _cut_off_loop(fulls)
        if cut is not None:
            kept = kept[:cut]
            done = True
        if only_repeats(kept, fulls[: len(kept)], ctx):
            return Result("", done)
        return Result(finish(kept, max_lines), done)
    n_full = min(len(kept), n_complete)
    complete = fulls[:n_full]
    cut = repeat_cut(complete, rep_clear)
    if cut is None:
        rep_clear = n_full
    if m > start:  # remember the complete lines for the next streamed call
        if saved[4] is None:
            saved = (*saved[:4], block_indent(ctx, full0))
        if len(_LOOPS) >= _LOOPS_MAX:
            _LOOPS.clear()
        _LOOPS[id(ctx)] = ctx, _Loop._make((tuple(parts[:m]), tuple(kept[:m]), tuple(fulls[:m]), *saved, rep_clear))
    h = repeat_holdback(complete, parts[n_complete] if n_complete < len(parts) else None)
    if cut is not None and cut <= h:
        return Result(finish(kept[:cut], max_lines), True)
    if h < n_full or held:
        kept = kept[:h]
    # else the shown partial line (if any) passed the hold checks above
    if only_repeats(kept, fulls[: len(kept)], ctx):
        return Result("", False)
    return Result(finish(kept, max_lines), False)


def _around(ctx: PostContext) -> tuple[Sequence[str], ...]:
    """The lines around the cursor, where a token or an invisible character is text already."""
    return ctx.prev_lines, (ctx.line_prefix + ctx.line_suffix,), ctx.next_lines


def process(raw: str, ctx: PostContext, *, final: bool) -> Result:
    """Post-process the accumulated raw completion `raw` for the cursor in `ctx`."""
    if ctx.heal:
        if not raw.startswith(ctx.heal):
            # still arriving, or the model went on otherwise than the typed spaces: nothing fits
            return Result("", not (ctx.heal.startswith(raw) and not final))
        raw = raw[len(ctx.heal):]
    if ctx.chat:
        code = chat_code(raw, line_prefix=ctx.line_prefix, prev_lines=ctx.prev_lines, final=final)
        if code.text is None:
            return Result("", False)  # a wrapper (a think block, a fence line) still arriving
        raw, final = code.text, final or code.ended
    res = _process(raw, ctx, final)
    # stage 9: what Tab would insert is what the user reads
    if res.text and hidden_char(res.text, around=_around(ctx), before=ctx.line_prefix, after=ctx.line_suffix):
        return Result("", True)
    return res


def _process(raw: str, ctx: PostContext, final: bool) -> Result:
    text, stopped = cut_stop_strings(raw, ctx.stop_strings, final=final)
    # another family's end or FIM token ends the answer as the model's own does (the served
    # model's are cut above whatever the buffer holds; another's only where it is no text)
    text, foreign = cut_foreign_tokens(text, before=ctx.line_prefix, around=_around(ctx),
                                       filetype=ctx.filetype, final=final or stopped)
    stopped = stopped or foreign
    final = final or stopped
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    # a control character (tab and newline aside; a last CR may begin a CRLF), a
    # bidirectional override, or more text than a completion has: a hostile or broken
    # answer is never shown or inserted (limits.py)
    if len(text) > MAX_SUGGESTION_CHARS or unsafe_char(text if final or text[-1:] != "\r" else text[:-1]):
        return Result("", True)
    if ctx.line_suffix.strip(_WS):
        # stage 2: mid-line completions stay on the cursor line
        line, complete = keep_first_line(text)
        if complete or final:
            return Result(_mid_line_final(line, ctx), complete or stopped)
        shown = _rstrip(line[: _mid_line_hold(line, ctx)])
        return Result(shown if shown.strip() else "", False)
    res = _multi_line(text, ctx, final)
    if stopped and not res.done:
        res = Result(res.text, True)
    return res
