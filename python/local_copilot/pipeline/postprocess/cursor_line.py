"""Stages 2 to 4 on the cursor line, when text follows the cursor: the suggestion stays on
that line, drops the part that repeats the text after the cursor, and does not insert a
closer the line already has (also where that closer comes before the repeated part)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .context import PostContext
from .lines import _WS, _is_word, _rstrip
from .scanner import _OPEN_FOR, _end_state, _first_outer, _imbalance
from .structure import _continues_below, _entry_stack, _in_block_comment

# languages with the C preprocessor, whose `#` lines are directives, not comments
_PREPROCESSED = frozenset({"c", "cpp", "objc", "objcpp", "cuda", "arduino", "ch"})
_DIRECTIVE = re.compile(r"[ \t]*#[ \t]*(?:if|ifdef|ifndef|elif|else|endif|define|undef|include|pragma|error|warning|line)\b")


# languages whose comments run from `/*` to `*/` (elsewhere the pair is text: a glob, a path)
_BLOCK_COMMENTED = _PREPROCESSED | frozenset({
    "java", "javascript", "javascriptreact", "typescript", "typescriptreact", "go", "rust", "css", "scss", "less",
    "kotlin", "swift", "php", "cs", "scala", "dart", "zig", "groovy", "proto"})


def _in_prose(ctx: PostContext) -> bool:
    """Whether the cursor is inside a `/* */` comment (opened before it on its line or on a
    line above, not closed): its brackets and quotes are prose (a name quoted as `this'), which do
    not pair, so the bracket scan says nothing of what a cut leaves open."""
    if ctx.filetype not in _BLOCK_COMMENTED:
        return False
    pre = ctx.line_prefix
    o, c = pre.rfind("/*"), pre.rfind("*/")
    if o >= 0 or c >= 0:
        return o > c
    return _in_block_comment(ctx, ())


def _code_prefix(ctx: PostContext) -> str:
    """The text before the cursor as the bracket scan reads it: in a C preprocessor
    directive (``#if __GNUC_PREREQ (``, ``#  define f(x)``) the `#` is no comment, its
    brackets count as any line's (the scan, language-blind, takes `#` for a comment)."""
    pre = ctx.line_prefix
    if ctx.filetype in _PREPROCESSED and _DIRECTIVE.match(pre):
        i = pre.index("#")
        return pre[:i] + " " + pre[i + 1:]
    return pre


def keep_first_line(text: str) -> tuple[str, bool]:
    """(first line, whether a newline ended it)."""
    i = text.find("\n")
    return (text, False) if i < 0 else (text[:i], True)


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
    pre, suf = _code_prefix(ctx), ctx.line_suffix
    e0: tuple[tuple[str, ...], int] | None = None
    whole = 0
    entry: tuple[str, ...] = ()
    prose: bool | None = None
    for p in _overlap_starts(lr, s_r, s_l):
        t = lr[p:]
        if not (t in (s_r, s_l) or len(t) >= 3 or not _is_word(t[0])):
            continue
        if prose is None:
            prose = _in_prose(ctx)
        if prose:
            return line[:p]  # (a comment's quotes and brackets do not pair: the repeat is the signal)
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
        if cut in (e0, w_state) or c_imb < whole or c_imb == 0:
            return line[:p]
    return None


def drop_duplicate_closer(line: str, ctx: PostContext) -> str:
    """Don't insert a closer the line already has after the cursor (autopairs).

    If inserting `line` unbalances the line and its first closer of an outer
    bracket/quote is the one the text after the cursor closes first, the existing
    closer does that job: cut there.  ``foo(|)`` + ``bar) {`` -> ``bar``, while
    ``g(x))`` keeps ``g(x)`` (the first ``)`` closes the new ``(``).
    """
    pre, suf = _code_prefix(ctx), ctx.line_suffix
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
    pre = _code_prefix(ctx)
    q = _first_outer(pre, line)
    if q is not None:
        s = _first_outer(pre, ctx.line_suffix)
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
    # two junk pieces come together too: a closer the line already has, then the line's
    # rest written again (`pairs(|) do` answered `t)) do`): the closer goes after the rest
    cut = drop_suffix_repeat(line, ctx)
    out = drop_duplicate_closer(line if cut is None else cut, ctx)
    suf = ctx.line_suffix
    # Keep a space that separates the insertion from a following word/operand, and one
    # before a closer whose bracket the line pads on the inside.
    if not suf or suf[0] in _WS or suf[0] in ")]}>,;:.":
        pad = out.endswith(" ") and not out.endswith("  ") and _padded_closer(ctx.line_prefix + out, suf[:1])
        out = _rstrip(out) + (" " if pad and out.strip() else "")
    return out if out.strip() else ""
