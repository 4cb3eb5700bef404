"""Prompt styles: how a request asks the served model for the text at the cursor.

* ``fim``: a fill-in-the-middle prompt in the model's own FIM tokens (prompt/templates.py).
* ``continue``: a base model without FIM training gets the text before the cursor and writes
  what follows it; the text after the cursor is never in the prompt, and the post-processor
  cuts what the model repeats of it.
* ``chat``: an instruct model gets a hole-filling chat conversation: the code before and after
  a marked cursor, the file's name and language, one short example, and the request to answer
  only the missing code. Its answer is cleaned of what chat models put around code
  (chat_answer.py).

A backend entry's `prompt` option forces a style; otherwise each dialect decides from what
its server tells of the served model, with the helpers here: FIM tokens in its vocabulary,
whether its chat template is its own, and what its name says of the family. The decision and
the reason for it are shown by :checkhealth and `local-copilot doctor`.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from .templates import FimTemplate, _make

__all__ = [
    "AFTER_LABEL",
    "BEFORE_LABEL",
    "CHAT_TURN_TOKENS",
    "CONTINUE",
    "CURSOR",
    "STYLES",
    "Decision",
    "Style",
    "chat_messages",
    "language_of",
    "name_says",
    "no_fim_family",
    "template_markers",
]

Style = Literal["fim", "continue", "chat"]
STYLES: tuple[Style, ...] = ("fim", "continue", "chat")


class Decision(msgspec.Struct, frozen=True):
    """The style a backend uses and, in words, why (health shows both)."""

    style: Style
    reason: str


# The text before the cursor, and the typed part of the cursor line last: typing only appends
# to the prompt, so the server's prompt cache keeps all of it (render() adds `middle`).
CONTINUE: FimTemplate = _make("continue", "a base model continues the text before the cursor",
                              lambda prefix, suffix, extra, path, repo: prefix, (), ())

# Chat models' turn and end tokens, as text: an answer ends at the first one (a server that
# writes them as text, a model that starts the next turn itself).
CHAT_TURN_TOKENS: tuple[str, ...] = (
    "<|im_end|>", "<|im_start|>", "<end_of_turn>", "<start_of_turn>", "<|eot_id|>", "<|start_header_id|>",
    "<|end|>", "<|user|>", "<|assistant|>", "<|endoftext|>", "<|end_of_text|>", "[/INST]", "[INST]",
    "<｜end▁of▁sentence｜>", "<|end_of_role|>", "<|start_of_role|>",
)  # fmt: skip

# What a chat template writes around a turn, by family: the template is the model's own only
# where these are single tokens of its vocabulary (llama-server falls back to a ChatML template
# for a model that has none, and reports that one).
_TEMPLATE_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ChatML", ("<|im_start|>", "<|im_end|>")),
    ("Gemma", ("<start_of_turn>", "<end_of_turn>")),
    ("Llama 3", ("<|start_header_id|>", "<|eot_id|>")),
    ("Phi-3", ("<|user|>", "<|end|>")),
    ("Granite", ("<|start_of_role|>", "<|end_of_role|>")),
    ("DeepSeek", ("<｜User｜>", "<｜Assistant｜>")),
    ("Mistral", ("[INST]", "[/INST]")),
)


def template_markers(chat_template: str) -> tuple[str, tuple[str, ...]] | None:
    """The family and turn markers a chat template writes; None when it names none known."""
    for family, markers in _TEMPLATE_MARKERS:
        if all(m in chat_template for m in markers):
            return family, markers
    return None


# Families whose vocabulary may hold FIM-looking tokens their training never used (a shared
# tokenizer, reserved or carried-over entries): there a token is no proof of FIM training.
# Never the coder variants of the same names.
_NO_FIM = re.compile(
    r"(?<!code)gemma|smollm|(?<!code)(?<!code[-_ ])llama|phi-?[1-9]|(?<!code)mistral|mixtral|olmo|falcon|"
    r"tinyllama|gpt-?2|pythia")


def _base_name(model: str) -> str:
    parts = [p for p in re.split(r"[/\\]", model.strip().lower()) if p]
    return parts[-1] if parts else ""


def no_fim_family(model: str) -> bool:
    """Whether the model's name names a family trained without fill-in-the-middle."""
    return bool(_NO_FIM.search(_base_name(model)))


_INSTRUCT = re.compile(r"instruct|chat|(?:^|[-_.])it(?:$|[-_.])|(?:^|[-_.])sft(?:$|[-_.])|assistant")
_BASE = re.compile(r"(?:^|[-_.])(?:base|pt)(?:$|[-_.])")


def name_says(model: str) -> Literal["instruct", "base", ""]:
    """What the model's name says of its training: an instruct (chat) model, a base model, or
    nothing."""
    name = _base_name(model)
    if _INSTRUCT.search(name):
        return "instruct"
    if _BASE.search(name):
        return "base"
    return ""


# -- the chat style's prompt ---------------------------------------------------------------

CURSOR = "<CURSOR>"

_SYSTEM = (
    "You are a code completion engine. The user sends a file with the cursor marked "
    f"{CURSOR}. Reply with only the code to insert at {CURSOR}: no explanation, no "
    "Markdown fences, and none of the code before or after the cursor repeated."
)

_EXAMPLE = (
    ("example.py", "python", "def area(width, height):\n    return ", "\n\n\nprint(area(2, 3))\n"),
    "width * height",
)

# filetype -> the language's name where the two differ
_LANGUAGES = {
    "": "text", "cs": "C#", "cpp": "C++", "c": "C", "javascriptreact": "JavaScript (JSX)",
    "typescriptreact": "TypeScript (TSX)", "sh": "shell", "bash": "bash", "zsh": "zsh", "vim": "Vim script",
    "objc": "Objective-C", "objcpp": "Objective-C++", "make": "Makefile", "dockerfile": "Dockerfile",
}  # fmt: skip


def language_of(filetype: str) -> str:
    """The language's name for a Neovim filetype (its first part, ``html.handlebars``)."""
    ft = filetype.split(".", 1)[0].lower()
    return _LANGUAGES.get(ft, ft)


def _user(path: str, language: str, before: str, after: str) -> str:
    return f"File: {path or 'untitled'} ({language})\n{before}{CURSOR}{after}"


# the labels of the code around the cursor where the answer is begun on the cursor line; a
# model that writes one again has begun the prompt again (chat_answer.py ends the answer there)
AFTER_LABEL, BEFORE_LABEL = "The code after the cursor:", "The code before the cursor:"


def _user_before_last(path: str, language: str, before: str, after: str) -> str:
    """The file as the text after the cursor, then the text before it: the turn ends at the
    cursor, where the answer begun on the cursor line goes on. With the file in order and the
    cursor marked, a small model begun on the cursor line writes the marker and the line's
    rest again (the text that followed the same words in the turn above)."""
    return f"File: {path or 'untitled'} ({language})\n{AFTER_LABEL}\n{after}\n\n{BEFORE_LABEL}\n{before}"


def chat_messages(prefix: str, middle: str, suffix: str, *, path: str = "", filetype: str = "",
                  prefill: bool = False) -> list[dict[str, str]]:
    """The hole-filling conversation for the cursor between `prefix` + `middle` and `suffix`.

    `prefill`: the server continues a last assistant turn (llama-server does), and the answer
    is begun with the cursor line's text before the cursor, so that the model writes on from
    the cursor. A small instruct model asked for the code at a marker answers the prompt's
    example again or describes the file; begun on the cursor line it writes code that follows
    it. The answer may hold that text again before the code (llama-server's does): the chat
    answer's cleanup drops the line above and the cursor line written again from its start."""
    (ex_path, ex_lang, ex_before, ex_after), ex_answer = _EXAMPLE
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    before = prefix + middle
    user = _user_before_last if prefill else _user
    messages = [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": _user(ex_path, ex_lang, ex_before, ex_after)},
        {"role": "assistant", "content": ex_answer},
        {"role": "user", "content": user(name, language_of(filetype), before, suffix)},
    ]
    if prefill:
        # at a line's start the line above begins it (an empty turn is no prefill: the model
        # writes its role's name and a turn of its own)
        lines = before.split("\n")
        start = lines[-1] if lines[-1] or len(lines) == 1 else "\n".join(lines[-2:])
        messages.append({"role": "assistant", "content": start})
    return messages
