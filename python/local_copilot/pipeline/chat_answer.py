"""The code in a chat model's answer to the hole-filling prompt (prompt/styles.py), as the text
to insert at the cursor.

Asked for the missing code only, instruct models still often wrap it: a reasoning block
(``<think>...</think>``), a line of prose ("Here is the code:"), a Markdown fence, a sentence
after the code, the next turn's token; or they write the cursor line again from its start, or
the lines above it again, before the new code. A small one answers the prompt's own example
again wherever the cursor is (its answer `width * height`, or its code `def area(width,
height):`): that is nothing to insert where the code before the cursor names none of the
example's names. The post-processor runs this first on every
streamed chunk of a chat-style answer (the accumulated text), then its usual stages (the text
after the cursor repeated, the block's end, brackets) on what is left. While a wrapper may
still be arriving (an open think block, a fence line not finished) nothing is shown yet; text
once shown is never taken back by a later chunk, except where the usual stages hold it back.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Sequence

from ..prompt.styles import _EXAMPLE, AFTER_LABEL, BEFORE_LABEL, CHAT_TURN_TOKENS, CURSOR

__all__ = ["ChatCode", "chat_code"]

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n`]*$")
# a line that introduces the code ("Here is the completed code:", "Sure! The missing part:")
_INTRO = re.compile(
    r"^\s*(sure|certainly|of course|okay|ok|here|below|this|the (missing|completed|code|answer)|to complete|"
    r"you can|i\b|i'll|i'd|let me)\b[^\n]*[:.!]\s*$", re.I)
# a sentence after the code: words, no code punctuation
_SENTENCE = re.compile(r"^\s*[A-Z][\w'’,;:!?\"\- ]*[.!?:]\s*$")
_CODE_CHARS = re.compile(r"[(){}\[\];=<>#/\\|&*+`$@]")
_INTRO_WORDS = ("sure", "certainly", "of", "okay", "ok", "here", "below", "this", "the", "to", "you", "i", "let")
_INTRO_START = re.compile(rf"({'|'.join(_INTRO_WORDS)})\b", re.I)
_INLINE = re.compile(r"^\s*`([^`\n]+)`\s*$")
_TURN_PREFIXES = frozenset(t[:k] for t in CHAT_TURN_TOKENS for k in range(1, len(t)))
_WORD = re.compile(r"\w+")


def _example_lines() -> tuple[str, ...]:
    """The lines of the prompt's example file with its answer in place, and the answer alone."""
    (_path, _lang, before, after), answer = _EXAMPLE
    lines = (before + answer + after).split("\n")
    return tuple(dict.fromkeys(ln.strip() for ln in (*lines, answer) if ln.strip()))


_EXAMPLE_LINES = _example_lines()
# the names the example defines (`area`, `width`, `height`): no keyword, no builtin
_EXAMPLE_NAMES = frozenset(w for ln in _EXAMPLE_LINES for w in _WORD.findall(ln)
                           if w.isidentifier() and not keyword.iskeyword(w) and not hasattr(builtins, w))


class ChatCode:
    """What chat_code found: the code (None while a wrapper is still arriving) and whether the
    answer ended (a closing fence, a turn token, prose after the code)."""

    __slots__ = ("text", "ended")

    def __init__(self, text: str | None, ended: bool) -> None:
        self.text, self.ended = text, ended


def _cut_turn_token(text: str, final: bool) -> tuple[str, bool]:
    """The text before the first chat-turn token; a token's start at the end is held back."""
    cut = min((i for i in (text.find(t) for t in CHAT_TURN_TOKENS) if i >= 0), default=-1)
    if cut >= 0:
        return text[:cut], True
    if not final:
        tail = text.rfind("<", max(0, len(text) - 24))
        for start in (tail, text.rfind("[", max(0, len(text) - 8))):
            if start >= 0 and text[start:] in _TURN_PREFIXES:
                return text[:start], False
    return text, False


def _cut_labels(text: str, final: bool) -> tuple[str, bool]:
    """The text before a line that writes the prompt's labels again (the model went on to
    write the prompt, or to talk of it: "1. The code before the cursor:"; the answer ended);
    a last line that may still become one is held back while streaming, and dropped at the
    end."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        start = line.strip()
        if any(label in line for label in _LABELS):
            return "\n".join(lines[:i]), True
        if not i or not start:
            continue
        # a label's start, cut by n_predict ("The code af") or still arriving
        if i == len(lines) - 1 and any(label.startswith(start) for label in _LABELS) and (
                not final or len(start) >= len("The code")):
            return "\n".join(lines[:i]), final
    return text, False


_LABELS = (AFTER_LABEL, BEFORE_LABEL)


def _drop_think(text: str, final: bool) -> str | None:
    """The text after a leading reasoning block; None while it may still be one."""
    stripped = text.lstrip()
    if not stripped:
        return None if not final else ""
    if stripped.startswith(_THINK_OPEN):
        end = stripped.find(_THINK_CLOSE)
        if end < 0:
            return None if not final else ""
        return stripped[end + len(_THINK_CLOSE):].lstrip("\n")
    if _THINK_OPEN.startswith(stripped) and not final:
        return None
    return text


def _unwrap(text: str, final: bool) -> tuple[str | None, bool]:
    """The code inside a fence (the answer ends at its closing line) or, without one, the
    text less a leading intro line and a closing sentence; None while undecided."""
    lines = text.split("\n")
    # blank lines before an intro or a fence are the wrapper's
    lead = next((i for i, ln in enumerate(lines) if ln.strip()), len(lines) - 1)
    head = lines[lead]
    if lead and (_INTRO.match(head) or head.strip()[:1] in ("`", "~")):
        lines, head = lines[lead:], lines[lead]
    if len(lines) == 1 and not final and _unfinished_wrapper(head):
        return None, False  # maybe an intro or a fence, not finished yet
    if len(lines) > 1 and _INTRO.match(head) and not _CODE_CHARS.search(head.rstrip(":.! ")):
        lines = lines[1:]
        while len(lines) > 1 and not lines[0].strip():
            lines = lines[1:]
        head = lines[0]
        if len(lines) == 1 and not final and _unfinished_wrapper(head):
            return None, False
    if _FENCE.match(head):
        mark = head.strip()[:3]
        body = lines[1:]
        if not body:
            return (None, False) if not final else ("", True)
        for i, line in enumerate(body):
            if line.strip().startswith(mark):
                return "\n".join(body[:i]), True
        if not final and body[-1].strip() and set(body[-1].strip()) <= set(mark[0]):
            body = body[:-1]  # maybe the closing fence, arriving
        return "\n".join(body), False
    if len(lines) == 1:
        inline = _INLINE.match(head)
        if inline:  # `a + b`
            return inline.group(1), True
    # prose after the code: a blank line, then a sentence
    for i in range(1, len(lines) - 1):
        if not lines[i].strip() and _is_sentence(lines[i + 1]):
            return "\n".join(lines[:i]), True
    return "\n".join(lines), False


def _unfinished_wrapper(line: str) -> bool:
    """Whether a line still being written may turn out to be an intro or a fence."""
    start = line.strip()
    if not start:
        return False
    if set(start) <= set("`~") or _FENCE.match(line) or start.startswith("`"):
        return True
    if _CODE_CHARS.search(start):
        return False
    if _INTRO_START.match(start):
        return True
    # the intro's first word, still being written ("H", "Her")
    word = start.lower()
    return word.isalpha() and any(w.startswith(word) for w in _INTRO_WORDS)


def _is_sentence(line: str) -> bool:
    return bool(_SENTENCE.match(line)) and not _CODE_CHARS.search(line) and len(line.split()) >= 3


def _lead(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _drop_restated(text: str, line_prefix: str, prev_lines: Sequence[str]) -> str:
    """The answer less the lines above the cursor and the cursor line's start that it writes
    again: what is left goes after the cursor."""
    lines = text.split("\n")
    # the lines just above the cursor, written again (at any indentation)
    above = [ln.strip() for ln in prev_lines if ln.strip()]
    for k in range(min(len(above), len(lines) - 1), 0, -1):
        if [ln.strip() for ln in lines[:k]] == above[-k:]:
            lines = lines[k:]
            break
    first = lines[0]
    typed = line_prefix.strip()
    lead = _lead(first)
    body = first.lstrip(" \t")
    if typed and body.startswith(typed):
        # the cursor line again from its start: the rest goes after what is typed
        rest = body[len(typed):]
        lines[0] = rest if line_prefix[-1:] not in " \t" else rest.lstrip(" \t")
    elif not typed and line_prefix:
        # at an indented empty line the indentation is there already. Lines below the first
        # that sit left of it were written relative to the answer's first line (a block
        # written from column 0): they get what the model left out; lines at or right of it
        # were written where they go in the file
        lines[0] = body
        missing = line_prefix[len(lead):] if line_prefix.startswith(lead) else ""
        later = [ln for ln in lines[1:] if ln.strip()]
        if missing and later and min(len(_lead(ln)) for ln in later) < len(line_prefix):
            lines[1:] = [missing + ln if ln.strip() else ln for ln in lines[1:]]
    elif typed and typed.startswith(body.rstrip()) and body.strip() and len(lines) == 1:
        # the typed text's own start, still arriving
        return ""
    return "\n".join(lines)


def chat_code(raw: str, *, line_prefix: str, prev_lines: Sequence[str] = (), final: bool) -> ChatCode:
    """The code to insert at the cursor from a chat answer so far (`raw`)."""
    text, ended = _cut_turn_token(raw.replace("\r\n", "\n"), final)
    text, labelled = _cut_labels(text, final)
    ended = ended or labelled
    final = final or ended
    body = _drop_think(text, final)
    if body is None:
        return ChatCode(None, False)
    body = body.replace(CURSOR, "")
    code, closed = _unwrap(body, final)
    if code is None:
        return ChatCode(None, False)
    code = _drop_restated(code, line_prefix, prev_lines)
    echo = _echoes_example(code, line_prefix, prev_lines, final or closed)
    if echo is None:
        return ChatCode(None, False)
    return ChatCode("" if echo else code, ended or closed)


def _echoes_example(code: str, line_prefix: str, prev_lines: Sequence[str], final: bool) -> bool | None:
    """Whether the code is the prompt's example again (it starts with a line of it that names
    one of its names) where the code before the cursor names none of them (with no code
    before the cursor there is nothing to tell them apart: it stays); None while the code so
    far may still become it."""
    start = code.lstrip()
    before = [ln for ln in (*prev_lines, line_prefix) if ln.strip()]
    if not start or not before or any(_EXAMPLE_NAMES.intersection(_WORD.findall(ln)) for ln in before):
        return False
    lines = [ln for ln in _EXAMPLE_LINES if _EXAMPLE_NAMES.intersection(_WORD.findall(ln))]
    if any(start.startswith(ln) for ln in lines):
        return True
    return None if not final and any(ln.startswith(start.rstrip()) for ln in lines) else False
