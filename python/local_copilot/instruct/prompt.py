"""The chat prompt of an instruction edit: the selection, the code around it, the file's name
and language, the instruction, and earlier rounds of a follow-up.

The instruction comes last in the last message, so the prompt without it (sent while the
user types the instruction, to warm the server's prompt cache) is a prefix of the real one.
The code around the selection is fitted to the context the server gives a request, its long
lines cut (prompt/long_lines.py); a selection that does not fit with its answer is refused with
one message (`TooLarge`, errors.py).
"""

from __future__ import annotations

import math
import os

import msgspec

from ..errors import TooLarge
from ..prompt.long_lines import cut_lines

__all__ = ["BYTES_PER_TOKEN", "EditSpec", "Prompt", "TooLarge", "build", "estimate_tokens"]

# bytes per token, on the low side for code (3.5-4 is usual): a prompt counted a little too
# big is refused or trimmed early, one counted too small is refused by the server
BYTES_PER_TOKEN = 3.0
# the system message, the file header, the markers and the chat template's own tokens
OVERHEAD_TOKENS = 160

SYSTEM = (
    "You are a code editor. You get part of a file with a selected region and an instruction. "
    "Rewrite the selected region as the instruction says. Answer with the replacement code for "
    "the selected region only: no explanation, no Markdown fences, nothing before or after it. "
    "Keep the indentation and the style of the surrounding code."
)

_LANGUAGES = {
    "py": "python", "lua": "lua", "js": "javascript", "ts": "typescript", "rs": "rust", "go": "go",
    "c": "c", "h": "c", "cpp": "cpp", "hpp": "cpp", "java": "java", "rb": "ruby", "sh": "sh", "md": "markdown",
}


class EditSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What an edit asks about (the editor's `edit_request` event, less its routing)."""

    path: str = ""
    ft: str = ""
    lines: list[str]  # the selection
    before: list[str] = []  # lines above it, nearest last
    after: list[str] = []  # lines below it, nearest first
    instruction: str = ""
    # earlier rounds of a follow-up: [instruction, answer] pairs, oldest first; `lines` is
    # then the selection as it was before the first round
    history: list[list[str]] = []
    # the buffer's 'expandtab', 'shiftwidth', 'tabstop' (None: not known): the answer's
    # indentation is written so (local_copilot/indentation.py)
    et: bool | None = None
    sw: int = 0
    ts: int = 8


class Prompt(msgspec.Struct, frozen=True, kw_only=True):
    messages: list[dict[str, str]]
    tokens: int  # estimated prompt tokens
    max_tokens: int  # what the answer may use


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8", "surrogatepass")) / BYTES_PER_TOKEN)


def _lines_tokens(lines: list[str]) -> int:
    return estimate_tokens("\n".join(lines)) + len(lines) // 8


def _language(spec: EditSpec) -> str:
    if spec.ft:
        return spec.ft
    ext = os.path.splitext(spec.path)[1].lstrip(".").lower()
    return _LANGUAGES.get(ext, ext or "text")


def _fit(before: list[str], after: list[str], budget: int) -> tuple[list[str], list[str]]:
    """The lines nearest the selection that fit in `budget` tokens, above and below in turn."""
    above: list[str] = []
    below: list[str] = []
    used = 0
    i = j = 0
    while i < len(before) or j < len(after):
        took = False
        if i < len(before):
            cost = _lines_tokens([before[-1 - i]]) + 1
            if used + cost <= budget:
                above.append(before[-1 - i])
                used += cost
                i += 1
                took = True
            else:
                i = len(before)
        if j < len(after):
            cost = _lines_tokens([after[j]]) + 1
            if used + cost <= budget:
                below.append(after[j])
                used += cost
                j += 1
                took = True
            else:
                j = len(after)
        if not took:
            break
    above.reverse()
    return above, below


def _user_message(spec: EditSpec, before: list[str], after: list[str], instruction: str) -> str:
    # the code as one piece, the selection marked inside it: the model sees where it sits
    name = os.path.basename(spec.path) or "(unnamed buffer)"
    parts = [f"File: {name}", f"Language: {_language(spec)}", "", "<code>", *before, "<selection>", *spec.lines,
             "</selection>", *after, "</code>", "", "Answer with the new code for the selection only.",
             "Instruction: " + instruction]
    return "\n".join(parts)


def build(spec: EditSpec, limit: int | None, n_predict: int, *, warm: bool = False) -> Prompt:
    """The messages for `spec` on a server that gives a request `limit` tokens (None: unknown).
    `warm`: the prompt up to where the instruction goes (a prefix of the real one's text).
    Raises TooLarge."""
    selection = _lines_tokens(spec.lines)
    rounds = sum(estimate_tokens(q) + estimate_tokens(a) + 16 for q, a in spec.history)
    asked = estimate_tokens(spec.instruction)
    fixed = OVERHEAD_TOKENS + selection + rounds + asked
    # the answer is about as long as the selection (an edit rarely doubles it)
    answer = selection + 32
    if limit is not None and fixed + answer > limit:
        # (it and its rewritten form must both fit in the context the server gives a request)
        raise TooLarge(f"selection too large: ~{selection} tokens, the server takes {limit} per request")
    budget = (limit - fixed - answer) if limit is not None else 10**9
    before, after = _fit(list(cut_lines(spec.before)), list(cut_lines(spec.after)), budget)
    tokens = fixed + _lines_tokens(before) + _lines_tokens(after)
    max_tokens = n_predict if limit is None else max(1, min(n_predict, limit - tokens))
    messages = [{"role": "system", "content": SYSTEM}]
    if spec.history:
        first_q, first_a = spec.history[0]
        messages.append({"role": "user", "content": _user_message(spec, before, after, first_q)})
        messages.append({"role": "assistant", "content": first_a})
        for q, a in spec.history[1:]:
            messages.append({"role": "user", "content": "Instruction: " + q})
            messages.append({"role": "assistant", "content": a})
        last = "Change your answer. Answer with the whole new code for the selection only.\nInstruction: "
        content = last + ("" if warm else spec.instruction)
    else:
        content = _user_message(spec, before, after, "" if warm else spec.instruction)
    messages.append({"role": "user", "content": content})
    return Prompt(messages=messages, tokens=tokens, max_tokens=max_tokens)
