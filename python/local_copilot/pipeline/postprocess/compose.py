"""The stages composed into :func:`process`, called on every streamed chunk.

The pipeline is pure and deterministic and never shows text that a later call takes back:
while streaming (``final=False``) anything that a later chunk could still turn into a cut
(a partial stop string, a partial repeat of the text after the cursor, a line that may turn
out to duplicate the next existing line, trailing whitespace, ...) is held back, and every
cut that *is* decided is one the final call makes too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ...indentation import columns, restyle
from ...transport.limits import MAX_SUGGESTION_CHARS, unsafe_char
from ..chat_answer import chat_code
from ..foreign_tokens import cut_foreign_tokens
from ..invisible_chars import hidden_char
from .block import _leaves_string, block_indent, leaves_block
from .context import PostContext, Result
from .cursor_line import _mid_line_final, _mid_line_hold, keep_first_line
from .lines import _WS, _first_nonblank, _is_blank, _norm, _rstrip, indent_width
from .next_lines import closer_cut, opens_deeper, reindented_repeat, statement_of_its_own
from .repeats import _above_prefix, _cut_off_loop, _recent_prefix, only_repeats, repeat_cut, repeat_holdback
from .scanner import _opens_block, _scan_cached, _scan_line
from .stop_strings import cut_stop_strings
from .structure import _in_block_comment


def finish(lines: Sequence[str], max_lines: int) -> str:
    """Join, cap at `max_lines` lines, trim trailing blank lines/whitespace; a
    whitespace-only result is ''."""
    text = _rstrip("\n".join(lines[: max(1, max_lines)]))
    return text if text.strip() else ""


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
# max_lines.  Like the scanner's _RESUME it never changes a result.  Keyed by the
# context object (a stream's calls share it; the entry holds it, so its id is not reused):
# hashing a context hashes every line around the cursor, on every keystroke's answer.
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
    nxt_body = nxt_norm.lstrip(" \t") if nxt_norm is not None else None
    short_body = None  # the next line, when too short to be the same line at any depth
    if nxt_body is not None and not statement_of_its_own(nxt_body):
        short_body, nxt_body = nxt_body, None
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
            # the same line at another indentation: a model that writes the next line again
            # often gets its depth wrong (one step deeper under the line that has it)
            if k > 0:
                again = reindented_repeat(w, nxt_body, partial=partial)
                # a short one (`end`, `try:`, `---`) is the same line again only where it is
                # deeper than the existing one and nothing above it in the suggestion or on
                # the cursor line lets a line be deeper (no block, bracket or continuation):
                # a nested block's own `end` sits deeper after its header
                if (again is False and short_body is not None
                        and indent_width(w, ts) > indent_width(nxt_norm, ts) and not opens_deeper(fulls)):
                    again = reindented_repeat(w, short_body, partial=partial)
                if again is None:
                    held = True
                    break
                if again:
                    done = True
                    break
        # stage 5: the header of a body that is already there (the line below the cursor is
        # deeper than a block the suggestion's first line opens, nothing typed before the
        # cursor: a rewritten `if`/`while`/`else` line) is one line; what the model writes
        # after it is a second body
        if k == 1 and check0 and nxt is not None and _opens_block(full0) \
                and indent_width(nxt, ts) > indent_width(full0, ts):
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
        if ctx.rules == "all" and only_repeats(kept, fulls[: len(kept)], ctx):
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
    if ctx.rules == "all" and only_repeats(kept, fulls[: len(kept)], ctx):
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
    if ctx.rules == "none":
        text, stopped = cut_stop_strings(raw, ctx.stop_strings, final=final)
        return Result(text if final or stopped else "", stopped)
    if ctx.chat:
        code = chat_code(raw, line_prefix=ctx.line_prefix, prev_lines=ctx.prev_lines, final=final)
        if code.text is None:
            return Result("", False)  # a wrapper (a think block, a fence line) still arriving
        raw, final = code.text, final or code.ended
    res = _process(raw, ctx, final)
    # stage 9: what Tab would insert is what the user reads
    if (res.text and ctx.rules == "all"
            and hidden_char(res.text, around=_around(ctx), before=ctx.line_prefix, after=ctx.line_suffix)):
        return Result("", True)
    return res


def _first_at(ctx: PostContext) -> int | None:
    """The column the suggestion's first line starts at, where that line starts in the cursor
    line's indentation (nothing but whitespace before the cursor); None: its leading
    whitespace follows other text and is left as it is."""
    if ctx.line_prefix.strip(_WS):
        return None
    assert ctx.indent is not None
    return columns(ctx.line_prefix, 0, ctx.indent.tabstop)


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
    if ctx.indent is not None:
        # the indentation written the buffer's way first: the rules below compare the lines
        # as they will stand in the buffer (a tab that is one level of four spaces is no
        # tab stop of eight to them)
        text = restyle(text, ctx.indent, first_at=_first_at(ctx))
    res = _multi_line(text, ctx, final)
    if stopped and not res.done:
        res = Result(res.text, True)
    return res
