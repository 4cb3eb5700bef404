"""Other model families' special tokens in an answer: where the answer ends.

The served model's own tokens are the template's stop strings (prompt/templates.py), cut by
the post-processor's first stage. A model also writes the end-of-text, fill-in-the-middle and
chat-turn tokens of *other* families as plain text — it saw them in its training data, or it is
served with another family's template — and inserted, they are garbage in the buffer. Such a
token ends the answer as the model's own would.

A token is text too, though, so three rules keep the places where it is meant as text:

* it already appears in the text around the cursor (the lines the prompt is built from): the
  file is about tokens (a prompt template, a tokenizer's tests, this plugin's own templates);
* it is an HTML element's tag (``</s>``, ``<PRE>``) in a markup file, or ``</s>`` closes an
  ``<s>`` that the text around the cursor or the answer opened;
* it is written in brackets (``[PREFIX]``) right after a name, ``)`` or ``]``: a subscript
  (``config[PREFIX]``), not Mistral's control token.

Documented in :help local-copilot-foreign-tokens.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["FAMILIES", "MARKUP_FILETYPES", "cut_foreign_tokens", "is_markup"]

# The well-known end-of-text, FIM and chat-turn tokens of the common code model families, as
# their vocabularies spell them (DeepSeek's bars are U+FF5C and its spaces U+2581).
FAMILIES: dict[str, tuple[str, ...]] = {
    "Qwen, ChatML": (
        "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|fim_prefix|>", "<|fim_middle|>",
        "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
    ),
    "StarCoder, StarCoder2, SantaCoder, Granite Code, Stable Code": (
        "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<file_sep>", "<repo_name>",
        "<reponame>", "<fim-prefix>", "<fim-middle>", "<fim-suffix>", "<|endoftext|>",
    ),
    "CodeLlama, Llama 2": ("<PRE>", "<SUF>", "<MID>", "<EOT>", "</s>", "[INST]", "[/INST]"),
    "DeepSeek-Coder": (
        "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", "<｜end▁of▁sentence｜>",
        "<｜begin▁of▁sentence｜>", "<|EOT|>",
    ),
    "Codestral, Mistral": ("[SUFFIX]", "[PREFIX]", "[MIDDLE]", "[INST]", "[/INST]", "</s>"),
    "CodeGemma, Gemma": (
        "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|file_separator|>", "<bos>", "<eos>",
        "<start_of_turn>", "<end_of_turn>",
    ),
    "Llama 3": (
        "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|eom_id|>", "<|start_header_id|>",
        "<|end_header_id|>",
    ),
    "Granite 3": ("<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"),
    "Phi-3": ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>"),
    "CodeGeeX": ("<|code_prefix|>", "<|code_middle|>", "<|code_suffix|>"),
}  # fmt: skip

_TOKENS = tuple(sorted({t for ts in FAMILIES.values() for t in ts}, key=len, reverse=True))
# one pass over the answer finds them all (longest first at one place); each starts with < or [
_FIND = re.compile("|".join(map(re.escape, _TOKENS)))
_PREFIXES = frozenset(t[:k] for t in _TOKENS for k in range(1, len(t)))
_LONGEST = len(_TOKENS[0])

# Filetypes where tags are the text: `</s>` closes a strikethrough, `<PRE>` opens preformatted text.
MARKUP_FILETYPES = frozenset({
    "html", "xhtml", "xml", "svg", "xsd", "xslt", "vue", "svelte", "astro", "markdown", "mdx",
    "rmd", "quarto", "javascriptreact", "typescriptreact", "php", "eruby", "htmldjango", "jinja",
    "handlebars", "mustache", "liquid", "twig", "blade", "templ", "razor", "jsp", "gohtmltmpl",
})  # fmt: skip
_HTML_TAGS = frozenset({"</s>", "<PRE>"})


def is_markup(filetype: str) -> bool:
    """Whether a (maybe compound, ``html.handlebars``) filetype is a markup language's."""
    return any(part in MARKUP_FILETYPES for part in filetype.lower().split("."))


def _around_has(around: Sequence[Sequence[str]], text: str) -> bool:
    return any(text in line for lines in around for line in lines)


def _subscript(before: str, text: str, i: int) -> bool:
    prev = text[i - 1] if i > 0 else before[-1:]
    return bool(prev) and (prev.isalnum() or prev in "_)]")


def _is_token(tok: str, i: int, text: str, before: str, around: Sequence[Sequence[str]], markup: bool,
              seen: dict[str, bool]) -> bool:
    if tok[0] == "[" and _subscript(before, text, i):
        return False
    if tok in _HTML_TAGS and markup:
        return False
    if tok == "</s>":
        opened = text[:i]
        if "<s>" in opened or "<s " in opened or _around_has(around, "<s>") or _around_has(around, "<s "):
            return False
    if tok not in seen:
        seen[tok] = _around_has(around, tok)
    return not seen[tok]


def cut_foreign_tokens(text: str, *, before: str = "", around: Sequence[Sequence[str]] = (),
                       filetype: str = "", final: bool) -> tuple[str, bool]:
    """`text` up to the first foreign special token; returns (text, found).

    `before` is the cursor line's text before the answer, `around` the lines the prompt is built
    from (a few sequences of lines), `filetype` the buffer's. While streaming (not `final`), a
    tail that could still grow into a token is held back, as the first stage holds the served
    model's own stop strings: what is shown is never taken back by the next chunk.
    """
    seen: dict[str, bool] = {}  # tokens looked up in `around` (a scan of the window each)
    markup: bool | None = None  # (asked once a token is found: most answers hold none)
    for m in _FIND.finditer(text) if ("<" in text or "[" in text) else ():
        if markup is None:
            markup = is_markup(filetype)
        if _is_token(m.group(), m.start(), text, before, around, markup, seen):
            return text[: m.start()], True
    if final:
        return text, False
    # the longest tail that is the start of a token begins at the last < or [ (no token holds
    # either one after its first character)
    lo = max(0, len(text) - _LONGEST + 1)
    j = max(text.rfind("<", lo), text.rfind("[", lo))
    if j >= 0 and text[j:] in _PREFIXES and not (text[j] == "[" and _subscript(before, text, j)):
        return text[:j], False
    return text, False
