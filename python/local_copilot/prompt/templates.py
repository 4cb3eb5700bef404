"""FIM prompt templates per model family: how to render a prompt, and where output must stop.

The formats are the model families' own (their model cards and tokenizer configs), and the
token texts those llama.cpp recognises as FIM tokens (its llama-vocab.cpp). The names in
`names()` are the public values of `fim_template`.

The client renders prompts itself because vLLM and llama.cpp's /v1/completions ignore `suffix`.
Prefix and suffix are inserted verbatim: a template never trims, escapes or drops user text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import msgspec

from ..errors import UnknownTemplateError

__all__ = [
    "DEFAULT_PATH",
    "DEFAULT_REPO",
    "ExtraChunk",
    "FimTemplate",
    "UnknownTemplateError",
    "detect_family",
    "detect_family_from_tokens",
    "get_template",
    "names",
]

# The placeholders llama.cpp's /infill hard-codes (§1.2); using the same ones keeps a prompt we
# render identical to the one the server would build, so both paths share the prompt cache.
DEFAULT_REPO = "myproject"
DEFAULT_PATH = "filename"
_DEFAULT_CHUNK_NAME = "tmp"


class ExtraChunk(msgspec.Struct, frozen=True):
    """Text of another file shown to the model as repo context (same shape as llama.cpp input_extra)."""

    filename: str
    text: str


# (prefix, suffix, extra, current path, repo name) -> prompt
_Layout = Callable[[str, str, Sequence[ExtraChunk], str, str], str]


@dataclass(frozen=True, slots=True)
class FimTemplate:
    name: str
    description: str
    # strings to send as server-side stops (vLLM `stop`, Ollama `options.stop`)
    stop: tuple[str, ...]
    # ids in the model's official vocab; empty where a family spans vocabs with different ids
    stop_token_ids: tuple[int, ...]
    # every marker the template writes plus every stop: a post-processor cuts output at any of them
    special_tokens: tuple[str, ...]
    # True when `extra` chunks are rendered (repo-level / multi-file form); others ignore them
    repo_level: bool
    # the marker tokens the layout writes (a server's vocab must have each as one token)
    markers: tuple[str, ...]
    # suffix-first forms (SPM, Codestral): the prefix is the prompt's last part
    prefix_last: bool
    _layout: _Layout = field(repr=False, compare=False)

    def render(
        self,
        prefix: str,
        suffix: str,
        *,
        extra: Sequence[ExtraChunk] = (),
        path: str = "",
        repo: str = "",
        middle: str = "",
    ) -> str:
        """The prompt text. Without a repo-level form, `extra`, `path` and `repo` are ignored:
        splicing other files into a format that has no separator for them would read as part of
        the current file.

        `middle` is the start of the middle the model is to continue (the cursor line up to the
        cursor): it goes after the middle marker, at the very end of the prompt, so typing on
        one line only appends to the prompt and the server's prompt cache keeps the prefix and
        the suffix (re-evaluating the suffix on every keystroke would cost a prompt evaluation
        per key).
        Suffix-first forms end with the prefix anyway, so there it just extends the prefix."""
        chunks = tuple(extra) if self.repo_level else ()
        if self.prefix_last:
            return self._layout(prefix + middle, suffix, chunks, path or DEFAULT_PATH, repo or DEFAULT_REPO)
        return self._layout(prefix, suffix, chunks, path or DEFAULT_PATH, repo or DEFAULT_REPO) + middle


def _chunk_name(chunk: ExtraChunk) -> str:
    return chunk.filename or _DEFAULT_CHUNK_NAME


def _psm(pre: str, suf: str, mid: str) -> _Layout:
    def layout(prefix: str, suffix: str, extra: Sequence[ExtraChunk], path: str, repo: str) -> str:
        return f"{pre}{prefix}{suf}{suffix}{mid}"

    return layout


def _qwen(prefix: str, suffix: str, extra: Sequence[ExtraChunk], path: str, repo: str) -> str:
    fim = f"<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>"
    if not extra:
        return fim
    # Qwen2.5-Coder repo-level format: a newline after the repo name, each path and each body.
    files = "".join(f"<|file_sep|>{_chunk_name(c)}\n{c.text}\n" for c in extra)
    return f"<|repo_name|>{repo}\n{files}<|file_sep|>{path}\n{fim}"


def _starcoder2(prefix: str, suffix: str, extra: Sequence[ExtraChunk], path: str, repo: str) -> str:
    if not extra:
        return f"<fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>"
    # StarCoder2 paper §5.1: the only added newline follows a path, and the FIM file's path sits
    # right after <fim_prefix> (the model saw it that way in training).
    files = "".join(f"<file_sep>{_chunk_name(c)}\n{c.text}" for c in extra)
    return (
        f"<repo_name>{repo}{files}<file_sep>"
        f"<fim_prefix>{path}\n{prefix}<fim_suffix>{suffix}<fim_middle>"
    )


def _codegemma(prefix: str, suffix: str, extra: Sequence[ExtraChunk], path: str, repo: str) -> str:
    fim = f"<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>"
    if not extra:
        return fim
    # <|file_separator|> ends a file (the model emits it after a fill); the path-then-body
    # layout is our choice, the docs only say the token separates files.
    files = "".join(f"{_chunk_name(c)}\n{c.text}<|file_separator|>" for c in extra)
    return f"{files}{path}\n{fim}"


# CodeLlama (meta infilling_prompt_tokens): <PRE>, <SUF>, <MID> are "▁"-tokens, i.e. carry a leading
# space, and sentencepiece gives the prefix a leading space; an empty prefix encodes to nothing.
def _codellama(prefix: str, suffix: str, extra: Sequence[ExtraChunk], path: str, repo: str) -> str:
    return f"<PRE>{' ' + prefix if prefix else ''} <SUF>{suffix} <MID>"


def _codellama_spm(prefix: str, suffix: str, extra: Sequence[ExtraChunk], path: str, repo: str) -> str:
    return f"<PRE> <SUF>{suffix} <MID>{' ' + prefix if prefix else ''}"


def _codestral(prefix: str, suffix: str, extra: Sequence[ExtraChunk], path: str, repo: str) -> str:
    # mistral_common encode_fim: [BOS, SUFFIX, suffix, PREFIX, prefix]; no middle token, the
    # model continues after the prefix. BOS comes from the tokenizer.
    return f"[SUFFIX]{suffix}[PREFIX]{prefix}"


def _make(
    name: str,
    description: str,
    layout: _Layout,
    markers: tuple[str, ...],
    stop: tuple[str, ...],
    stop_token_ids: tuple[int, ...] = (),
    *,
    repo_level: bool = False,
    prefix_last: bool = False,
) -> FimTemplate:
    special = tuple(dict.fromkeys(markers + stop))  # ordered, no duplicates
    return FimTemplate(name, description, stop, stop_token_ids, special, repo_level, markers, prefix_last, layout)


_QWEN_STOP = (
    "<|endoftext|>", "<|im_end|>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
)  # fmt: skip
_STARCODER_FIM = ("<fim_prefix>", "<fim_suffix>", "<fim_middle>")
_STARCODER_STOP = ("<|endoftext|>", "<file_sep>", *_STARCODER_FIM)
_GEMMA_FIM = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")
_LLAMA_FIM = ("<PRE>", "<SUF>", "<MID>")
_DEEPSEEK_FIM = ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>")

_TEMPLATES: dict[str, FimTemplate] = {
    t.name: t
    for t in (
        _make(
            "qwen", "Qwen2.5-Coder (PSM; repo-level form with extra chunks)", _qwen,
            ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>"),
            _QWEN_STOP, (151643, 151645, 151659, 151660, 151661, 151662, 151663, 151664),
            repo_level=True,
        ),
        _make(
            "deepseek", "DeepSeek-Coder v1 / V2 (PSM)", _psm(*_DEEPSEEK_FIM),
            _DEEPSEEK_FIM, ("<｜end▁of▁sentence｜>",),
        ),
        # </s> is id 2 and ▁<EOT> id 32010 in the CodeLlama 7B/13B vocab.
        _make("codellama", "CodeLlama 7B/13B (PSM)", _codellama, _LLAMA_FIM, ("<EOT>", "</s>"), (32010, 2)),
        _make(
            "codellama-spm", "CodeLlama 7B/13B (SPM: suffix first)", _codellama_spm,
            _LLAMA_FIM, ("<EOT>", "</s>"), (32010, 2), prefix_last=True,
        ),
        _make(
            "starcoder", "StarCoder / StarCoderBase / Granite Code / Stable Code (PSM)",
            _psm(*_STARCODER_FIM), _STARCODER_FIM, _STARCODER_STOP,
        ),
        _make(
            "starcoder2", "StarCoder2 (PSM; repo-level form with extra chunks)", _starcoder2,
            (*_STARCODER_FIM, "<repo_name>", "<file_sep>"), (*_STARCODER_STOP, "<repo_name>"),
            repo_level=True,
        ),
        _make(
            "codestral", "Codestral (suffix first, no middle token)", _codestral,
            ("[SUFFIX]", "[PREFIX]"), ("</s>", "[PREFIX]", "[SUFFIX]"), prefix_last=True,
        ),
        _make(
            "codegemma", "CodeGemma 2B/7B (PSM; multi-file form with extra chunks)", _codegemma,
            (*_GEMMA_FIM, "<|file_separator|>"), ("<|file_separator|>", "<eos>", *_GEMMA_FIM),
            repo_level=True,
        ),
    )
}  # fmt: skip

# Granite Code and Stable Code share StarCoder's <fim_*> tokens but not StarCoder2's
# <repo_name>/<file_sep> (Granite has <reponame>/<filename>), so they get the plain form.
_ALIASES: dict[str, str] = {"granite": "starcoder", "stable-code": "starcoder"}


def names() -> list[str]:
    """Every valid `fim_template` value (templates and aliases), sorted."""
    return sorted({*_TEMPLATES, *_ALIASES})


def get_template(name: str) -> FimTemplate:
    """The template for a name or alias (case-insensitive); `UnknownTemplateError` otherwise."""
    key = name.strip().lower()
    template = _TEMPLATES.get(_ALIASES.get(key, key))
    if template is None:
        raise UnknownTemplateError(f"unknown FIM template {name!r}; choose one of: {', '.join(names())}")
    return template


# First match wins, so specific names come before the generic ones they contain.
_MODEL_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), family)
    for pattern, family in (
        (r"codegemma", "codegemma"),  # never plain "gemma": Gemma chat models have no FIM tokens
        (r"codestral", "codestral"),
        (r"code[-_ ]?llama", "codellama"),  # never plain "llama"
        (r"codeqwen", "starcoder"),  # CodeQwen1.5 used <fim_*> tokens, not Qwen2.5's <|fim_*|>
        (r"starcoder2", "starcoder2"),
        (r"starcoder|granite.*code|stable[-_ ]?code", "starcoder"),
        (r"deepseek[-_ ]?coder", "deepseek"),
        (r"qwen", "qwen"),  # Qwen2.5+/Qwen3 vocabs all carry <|fim_*|>
    )
)


def detect_family(model_id: str) -> str | None:
    """Template name for a model id or path as servers report it; None when unknown."""
    parts = [p for p in re.split(r"[/\\]", model_id.strip().lower()) if p]
    if not parts:
        return None
    base = parts[-1]  # the basename: directory names say nothing reliable about the model
    for pattern, family in _MODEL_RULES:
        if pattern.search(base):
            return family
    return None


# Most specific first: CodeGemma's vocab also has <|fim_prefix|>, StarCoder2's also <fim_prefix>.
_TOKEN_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("codegemma", ("<|fim_prefix|>", "<|file_separator|>")),
    ("qwen", ("<|fim_prefix|>",)),
    ("deepseek", ("<｜fim▁begin｜>",)),
    ("starcoder2", ("<fim_prefix>", "<repo_name>", "<file_sep>")),
    ("starcoder", ("<fim_prefix>",)),
    ("codestral", ("[SUFFIX]",)),
    ("codellama", ("<PRE>",)),
)


def detect_family_from_tokens(token_texts: Iterable[str] | str) -> str | None:
    """Template name from FIM token texts (a vocab's tokens, or a rendered prompt given as one
    string, searched by substring); None when no known marker is present."""
    if isinstance(token_texts, str):
        text = token_texts

        def has(token: str) -> bool:
            return token in text

    else:
        # sentencepiece vocabs spell CodeLlama's markers "▁<PRE>"
        seen = {t.strip().lstrip("\u2581") for t in token_texts}

        def has(token: str) -> bool:
            return token in seen

    for family, required in _TOKEN_RULES:
        if all(has(t) for t in required):
            return family
    return None
