"""The code in a chat model's answer: Markdown fences, a reasoning block and a line of prose
around the code are dropped; an answer with no code in it is told apart.

Instruct models are asked for the replacement code only, yet often wrap it in a fence, start
with "Here is the updated code:", write the prompt's `<code>` and `<selection>` markup back
around it, or (reasoning models) think aloud first. `code_lines` runs
on every streamed chunk (partial answers: an open fence or think block is still open) and on
the final answer.
"""

from __future__ import annotations

import re

__all__ = ["code_lines", "fit", "is_prose", "reindent"]

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
# a line that introduces the code ("Here is the updated function:")
_INTRO = re.compile(r"^\s*(sure|certainly|here|okay|ok|below|the (updated|new|rewritten|modified|fixed))\b.*:\s*$",
                    re.I)
# prose: a sentence of words, no code punctuation
_SENTENCE = re.compile(r"^\s*[A-Z][\w'’,.;:!?\"\- ]*$")
_CODE_CHARS = re.compile(r"[(){}\[\];=<>#/\\|&*+`$@]")
# filetypes whose text is prose itself: no answer there is "not code"
PROSE_FILETYPES = frozenset({"", "text", "markdown", "rst", "tex", "plaintex", "gitcommit", "help", "mail", "org",
                             "asciidoc"})


def _drop_think(text: str) -> str | None:
    """The text after a leading reasoning block; None while the block is still open."""
    stripped = text.lstrip()
    if not stripped.startswith(_THINK_OPEN):
        return text if not _THINK_OPEN.startswith(stripped) or not stripped else None
    end = stripped.find(_THINK_CLOSE)
    return None if end < 0 else stripped[end + len(_THINK_CLOSE):]


# the markup the prompt puts around the code and the selection (instruct/prompt.py), which a
# small model writes back around its answer
_CODE_TAGS = ("<code>", "</code>")
_SELECTION_OPEN, _SELECTION_CLOSE = "<selection>", "</selection>"


def _drop_echo(lines: list[str]) -> list[str]:
    """The answer less the prompt's own markup written back: an answer that writes the code
    around the selection again is the part between the selection's markers; a `<code>` line
    opening or closing it goes."""
    marks = [ln.strip() for ln in lines]
    if _SELECTION_OPEN in marks:
        start = marks.index(_SELECTION_OPEN) + 1
        end = marks.index(_SELECTION_CLOSE, start) if _SELECTION_CLOSE in marks[start:] else len(lines)
        return lines[start:end]
    while lines and lines[0].strip() in _CODE_TAGS:
        lines = lines[1:]
    while lines and lines[-1].strip() in _CODE_TAGS:
        lines = lines[:-1]
    return lines


def code_lines(text: str, *, final: bool) -> list[str]:
    """The code of an answer as lines (partial while `final` is False: the last line may be
    incomplete, and is left out until its newline comes)."""
    body = _drop_think(text)
    if body is None:
        return []
    lines = body.split("\n")
    if not final:
        lines = lines[:-1]  # the line being written
    start = next((i for i, ln in enumerate(lines) if _FENCE.match(ln)), None)
    if start is not None:
        fence = _FENCE.match(lines[start]).group(1)  # type: ignore[union-attr]
        end = next((i for i in range(start + 1, len(lines)) if lines[i].strip().startswith(fence[:3])), None)
        lines = lines[start + 1:end] if end is not None else lines[start + 1:]
    else:
        while lines and not lines[0].strip():
            lines = lines[1:]
        if lines and _INTRO.match(lines[0]):
            lines = lines[1:]
    lines = _drop_echo(lines)
    if final:
        while lines and not lines[-1].strip():
            lines = lines[:-1]
        while lines and not lines[0].strip():
            lines = lines[1:]
    return lines


def is_prose(text: str, ft: str) -> bool:
    """Whether a whole answer is prose with no code in it (a refusal, an explanation): every
    line a sentence, and the file is code."""
    if ft in PROSE_FILETYPES:
        return False
    body = _drop_think(text) or ""
    if "```" in body or "~~~" in body:
        return False
    lines = [ln for ln in body.split("\n") if ln.strip()]
    if not lines:
        return False
    return lines[-1].rstrip().endswith((".", "!", "?", ":")) and all(
        _SENTENCE.match(ln) and not _CODE_CHARS.search(ln) and len(ln.split()) >= 3 for ln in lines)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def reindent(lines: list[str], selection: list[str]) -> list[str]:
    """`lines` moved to the selection's indentation when the model dropped it (an answer
    that starts at column 0 for a selection inside a block)."""
    sel = [ln for ln in selection if ln.strip()]
    got = [ln for ln in lines if ln.strip()]
    if not sel or not got:
        return lines
    base = min((_indent(ln) for ln in sel), key=len)
    if not base or any(_indent(ln) for ln in got[:1]):
        return lines
    return [base + ln if ln.strip() else ln for ln in lines]


def fit(lines: list[str], selection: list[str]) -> list[str]:
    """The answer's code made to replace the selection: its indentation (see `reindent`), and
    the blank lines the selection starts or ends with, which models leave out (accepting
    would otherwise glue the code to its neighbours)."""
    lines = reindent(lines, selection)
    if not any(ln.strip() for ln in selection):
        return lines
    lead = next(i for i, ln in enumerate(selection) if ln.strip())
    trail = next(i for i, ln in enumerate(reversed(selection)) if ln.strip())
    has_lead = next((i for i, ln in enumerate(lines) if ln.strip()), 0)
    has_trail = next((i for i, ln in enumerate(reversed(lines)) if ln.strip()), 0)
    return [""] * max(0, lead - has_lead) + lines + [""] * max(0, trail - has_trail)
