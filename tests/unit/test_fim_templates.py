"""FIM template registry (local_copilot.prompt.templates): golden prompts, stops, detection.

Golden files live in tests/fixtures/fim/<case>.json. The default run compares against them;
`UPDATE_GOLDEN=1 pytest tests/unit/test_fim_templates.py` rewrites them (review the diff).
The prompt is stored as a list of lines so a diff shows which line changed, and inside JSON
strings no editor or hook can strip trailing spaces or a final newline.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest

try:
    from local_copilot.prompt import templates as ft
except ImportError:  # running from a checkout without an installed package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    from local_copilot.prompt import templates as ft
from local_copilot.errors import ConfigError

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "fim"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

# A tab, CJK, an emoji (outside the BMP), spaces at both edges, several lines.
PREFIX = 'def greet(name):\n\t"""Say hi — 你好，世界 🚀"""\n\tmsg = f"héllo {name} '
SUFFIX = '"\n\treturn msg\n\n\nprint(greet("世界"))  # 🎉 done\n'
EXTRA = (
    ft.ExtraChunk("src/util.py", "def add(a, b):\n\treturn a + b  # 加法\n"),
    ft.ExtraChunk("README.md", "# Demo 🚀\nUsage: greet()\n"),
)
PATH = "src/main.py"
REPO = "demo-repo"

TEMPLATE_NAMES = ["qwen", "deepseek", "codellama", "codellama-spm", "starcoder", "starcoder2", "codestral", "codegemma"]

# case -> (template, with repo context)
GOLDEN_CASES = {
    "qwen": ("qwen", False),
    "qwen-repo": ("qwen", True),
    "deepseek": ("deepseek", False),
    "codellama": ("codellama", False),
    "codellama-spm": ("codellama-spm", False),
    "starcoder": ("starcoder", False),
    "starcoder2-repo": ("starcoder2", True),
    "codestral": ("codestral", False),
    "codegemma": ("codegemma", False),
    "codegemma-multifile": ("codegemma", True),
}


def _golden_doc(template: ft.FimTemplate, prompt: str) -> dict[str, object]:
    return {
        "template": template.name,
        "prompt_lines": prompt.splitlines(keepends=True),
        "stop": list(template.stop),
        "stop_token_ids": list(template.stop_token_ids),
        "special_tokens": list(template.special_tokens),
    }


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden(case: str) -> None:
    name, with_repo = GOLDEN_CASES[case]
    template = ft.get_template(name)
    prompt = (template.render(PREFIX, SUFFIX, extra=EXTRA, path=PATH, repo=REPO) if with_repo
              else template.render(PREFIX, SUFFIX))
    doc = _golden_doc(template, prompt)
    path = GOLDEN_DIR / f"{case}.json"
    if UPDATE:
        GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n", encoding="utf-8", newline="\n")
    assert path.is_file(), f"missing golden file {path}; run with UPDATE_GOLDEN=1 to create it"
    expected = json.loads(path.read_text(encoding="utf-8"))
    assert "".join(expected["prompt_lines"]) == prompt, f"{case}: prompt differs (UPDATE_GOLDEN=1 rewrites)"
    assert expected == doc


# Small literal renders: the formats from the reference, independent of the golden files.
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("qwen", "<|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>"),
        ("deepseek", "<｜fim▁begin｜>P<｜fim▁hole｜>S<｜fim▁end｜>"),
        ("codellama", "<PRE> P <SUF>S <MID>"),
        ("codellama-spm", "<PRE> <SUF>S <MID> P"),
        ("starcoder", "<fim_prefix>P<fim_suffix>S<fim_middle>"),
        ("starcoder2", "<fim_prefix>P<fim_suffix>S<fim_middle>"),
        ("granite", "<fim_prefix>P<fim_suffix>S<fim_middle>"),
        ("stable-code", "<fim_prefix>P<fim_suffix>S<fim_middle>"),
        ("codestral", "[SUFFIX]S[PREFIX]P"),
        ("codegemma", "<|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>"),
    ],
)
def test_minimal_render(name: str, expected: str) -> None:
    assert ft.get_template(name).render("P", "S") == expected


def test_codellama_empty_prefix_has_no_dummy_space() -> None:
    # sentencepiece encodes "" to no tokens, so only the space of ▁<SUF> / ▁<MID> remains
    assert ft.get_template("codellama").render("", "S") == "<PRE> <SUF>S <MID>"
    assert ft.get_template("codellama-spm").render("", "S") == "<PRE> <SUF>S <MID>"


def test_qwen_repo_level_literal() -> None:
    extra = [ft.ExtraChunk("a.py", "A = 1"), ft.ExtraChunk("b.py", "B = 2\n")]
    got = ft.get_template("qwen").render("P", "S", extra=extra, path="m.py", repo="r")
    assert got == (
        "<|repo_name|>r\n<|file_sep|>a.py\nA = 1\n<|file_sep|>b.py\nB = 2\n\n"
        "<|file_sep|>m.py\n<|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>"
    )


def test_starcoder2_repo_level_literal() -> None:
    extra = [ft.ExtraChunk("a.py", "A = 1\n"), ft.ExtraChunk("b.py", "B = 2\n")]
    got = ft.get_template("starcoder2").render("P", "S", extra=extra, path="m.py", repo="r")
    assert got == (
        "<repo_name>r<file_sep>a.py\nA = 1\n<file_sep>b.py\nB = 2\n"
        "<file_sep><fim_prefix>m.py\nP<fim_suffix>S<fim_middle>"
    )


def test_repo_level_defaults_match_llama_cpp_placeholders() -> None:
    got = ft.get_template("qwen").render("P", "S", extra=[ft.ExtraChunk("", "x\n")])
    assert got.startswith(f"<|repo_name|>{ft.DEFAULT_REPO}\n<|file_sep|>tmp\nx\n\n<|file_sep|>{ft.DEFAULT_PATH}\n")
    assert (ft.DEFAULT_REPO, ft.DEFAULT_PATH) == ("myproject", "filename")


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_extra_ignored_without_repo_form(name: str) -> None:
    template = ft.get_template(name)
    plain = template.render(PREFIX, SUFFIX)
    with_extra = template.render(PREFIX, SUFFIX, extra=EXTRA, path=PATH, repo=REPO)
    assert (with_extra != plain) == template.repo_level
    assert template.render(PREFIX, SUFFIX, extra=(), path=PATH, repo=REPO) == plain


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
@pytest.mark.parametrize(
    ("prefix", "suffix"),
    [
        (PREFIX, SUFFIX),
        ("", ""),
        ("  lead and trail  ", "\r\nwindows\r\n"),
        ("x" * 5000, "\n" * 3),
        ("only prefix", ""),
        ("", "only suffix"),
    ],
)
def test_render_keeps_prefix_and_suffix(name: str, prefix: str, suffix: str) -> None:
    template = ft.get_template(name)
    for extra in ((), EXTRA):
        prompt = template.render(prefix, suffix, extra=extra, path=PATH, repo=REPO)
        assert prefix in prompt and suffix in prompt
        # with its markers removed, the prompt still holds both texts in one piece
        stripped = prompt
        for tok in template.special_tokens:
            stripped = stripped.replace(tok, "\x00")
        pieces = stripped.split("\x00")
        assert any(prefix in p for p in pieces) and any(suffix in p for p in pieces)
        if template.repo_level and extra:
            for chunk in extra:
                assert chunk.text in prompt and chunk.filename in prompt


def test_names_sorted_and_complete() -> None:
    got = ft.names()
    assert got == sorted(got)
    assert set(got) == {*TEMPLATE_NAMES, "granite", "stable-code"}


def test_aliases_and_case() -> None:
    assert ft.get_template("Granite").name == "starcoder"
    assert ft.get_template("stable-code").name == "starcoder"
    assert ft.get_template(" QWEN ").name == "qwen"
    for name in TEMPLATE_NAMES:
        assert ft.get_template(name).name == name


@pytest.mark.parametrize("bad", ["foo", "", "qwen2", "llama"])
def test_unknown_template_error_lists_names(bad: str) -> None:
    with pytest.raises(ft.UnknownTemplateError) as info:
        ft.get_template(bad)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ConfigError)
    assert str(info.value) == f"unknown FIM template {bad!r}; choose one of: {', '.join(ft.names())}"


def test_template_is_frozen() -> None:
    template = ft.get_template("qwen")
    with pytest.raises(dataclasses.FrozenInstanceError):
        template.name = "x"  # type: ignore[misc]


def test_stop_token_ids() -> None:
    assert ft.get_template("qwen").stop_token_ids == (151643, 151645, 151659, 151660, 151661, 151662, 151663, 151664)
    assert ft.get_template("codellama").stop_token_ids == (32010, 2)
    for name in ("deepseek", "starcoder", "starcoder2", "codestral", "codegemma"):
        assert ft.get_template(name).stop_token_ids == ()


# What the model emits when a fill is done: EOS/EOT and the next-file separator (reference §4).
MUST_STOP = {
    "qwen": {"<|endoftext|>", "<|im_end|>", "<|file_sep|>", "<|repo_name|>", "<|fim_pad|>",
             "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"},
    "deepseek": {"<｜end▁of▁sentence｜>"},
    "codellama": {"<EOT>", "</s>"},
    "codellama-spm": {"<EOT>", "</s>"},
    "starcoder": {"<|endoftext|>", "<file_sep>", "<fim_prefix>", "<fim_suffix>", "<fim_middle>"},
    "starcoder2": {"<|endoftext|>", "<file_sep>", "<fim_prefix>", "<fim_suffix>", "<fim_middle>"},
    "codestral": {"</s>", "[PREFIX]", "[SUFFIX]"},
    "codegemma": {"<|file_separator|>", "<eos>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"},
}  # fmt: skip


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_stops_are_sane(name: str) -> None:
    template = ft.get_template(name)
    assert MUST_STOP[name] <= set(template.stop)
    assert len(set(template.stop)) == len(template.stop) and all(template.stop)
    # the post-processor cuts at special_tokens, so they must cover every stop
    assert set(template.stop) <= set(template.special_tokens)
    assert len(set(template.special_tokens)) == len(template.special_tokens)
    # every marker the prompt uses is a special token
    prompt = template.render("", "", extra=EXTRA, path="", repo="")
    leftover = prompt
    for tok in sorted(template.special_tokens, key=len, reverse=True):
        leftover = leftover.replace(tok, "")
    for chunk in EXTRA if template.repo_level else ():
        leftover = leftover.replace(chunk.text, "").replace(chunk.filename, "")
    leftover = leftover.replace(ft.DEFAULT_REPO, "").replace(ft.DEFAULT_PATH, "")
    assert leftover.strip() == "", f"{name}: prompt text outside the special tokens: {leftover!r}"
    # a file separator the repo form writes is what the model emits after the fill: must stop there
    if template.repo_level:
        for sep in ("<|file_sep|>", "<file_sep>", "<|file_separator|>"):
            if sep in prompt:
                assert sep in template.stop


@pytest.mark.parametrize(
    ("model_id", "family"),
    [
        ("Qwen/Qwen2.5-Coder-1.5B", "qwen"),
        ("qwen2.5-coder:1.5b-base", "qwen"),
        ("qwen2.5-coder-1.5b-q8_0.gguf", "qwen"),
        ("/models/qwen2.5-coder-1.5b-q8_0.gguf", "qwen"),
        ("C:\\models\\Qwen2.5-Coder-7B-Q4_K_M.gguf", "qwen"),
        ("/srv/models/Qwen2.5-Coder-1.5B/", "qwen"),
        ("tiny-qwen2-fim", "qwen"),
        ("deepseek-coder-6.7b-base", "deepseek"),
        ("DeepSeek-Coder-V2-Lite-Base", "deepseek"),
        ("deepseek-ai/deepseek-coder-1.3b-base", "deepseek"),
        ("codellama:7b-code", "codellama"),
        ("meta-llama/CodeLlama-7b-hf", "codellama"),
        ("bigcode/starcoder2-3b", "starcoder2"),
        ("bigcode/starcoderbase-1b", "starcoder"),
        ("granite-3b-code-base", "starcoder"),
        ("ibm-granite/granite-8b-code-base-4k", "starcoder"),
        ("stable-code-3b", "starcoder"),
        ("stabilityai/stable-code-3b", "starcoder"),
        ("CodeQwen1.5-7B", "starcoder"),
        ("codestral-22b", "codestral"),
        ("mistralai/Codestral-22B-v0.1", "codestral"),
        ("codegemma-2b", "codegemma"),
        ("codegemma:7b-code", "codegemma"),
        # negatives
        ("llama-3-8b-instruct", None),
        ("gemma-2b", None),
        ("mistral-7b-instruct-v0.3", None),
        ("/models/qwen/llama-3-8b.gguf", None),  # only the basename counts
        ("", None),
        ("/", None),
    ],
)
def test_detect_family(model_id: str, family: str | None) -> None:
    assert ft.detect_family(model_id) == family
    if family is not None:
        assert ft.get_template(family).name == family


@pytest.mark.parametrize(
    ("tokens", "family"),
    [
        (["<|endoftext|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>"], "qwen"),
        (["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"], "qwen"),
        (["<eos>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|file_separator|>"], "codegemma"),
        (["<｜begin▁of▁sentence｜>", "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"], "deepseek"),
        (["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<filename>"], "starcoder"),
        (["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<repo_name>", "<file_sep>"], "starcoder2"),
        (["</s>", "[INST]", "[SUFFIX]", "[PREFIX]"], "codestral"),
        (["<s>", "</s>", "▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"], "codellama"),
        (["<PRE>", "<SUF>", "<MID>"], "codellama"),
        (iter(["<|fim_prefix|>"]), "qwen"),  # any iterable, consumed once
        (["<s>", "</s>", "<|im_start|>", "<|im_end|>"], None),
        ([], None),
        # a prompt as llama.cpp renders it (one string, searched by substring)
        ("<|repo_name|>myproject\n<|file_sep|>filename\n<|fim_prefix|>def add(a, b):\n    return "
         "<|fim_suffix|>\n<|fim_middle|>", "qwen"),
        ("<｜fim▁begin｜>x = <｜fim▁hole｜>\n<｜fim▁end｜>", "deepseek"),
        (" <PRE> def f(): <SUF>\n <MID>", "codellama"),
        ("plain text, no markers", None),
    ],
)  # fmt: skip
def test_detect_family_from_tokens(tokens: object, family: str | None) -> None:
    assert ft.detect_family_from_tokens(tokens) == family  # type: ignore[arg-type]


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_template_tokens_detect_their_family(name: str) -> None:
    template = ft.get_template(name)
    expected = "codellama" if name == "codellama-spm" else name
    assert ft.detect_family_from_tokens(template.special_tokens) == expected
    prompt = template.render(PREFIX, SUFFIX, extra=EXTRA, path=PATH, repo=REPO)
    assert ft.detect_family_from_tokens(prompt) == expected
    # codegemma's plain form is spelled like Qwen's; only its file separator tells them apart
    if name == "codegemma":
        assert ft.detect_family_from_tokens(template.render(PREFIX, SUFFIX)) == "qwen"


def test_golden_dir_has_no_strays() -> None:
    if GOLDEN_DIR.is_dir():
        assert {p.stem for p in GOLDEN_DIR.glob("*.json")} <= set(GOLDEN_CASES)


def test_the_start_of_the_middle_goes_last_so_typing_only_appends_to_the_prompt() -> None:
    qwen = ft.get_template("qwen")
    one = qwen.render("a = 1\n", "\nb = 2", middle="pri")
    two = qwen.render("a = 1\n", "\nb = 2", middle="prin")
    assert one == "<|fim_prefix|>a = 1\n<|fim_suffix|>\nb = 2<|fim_middle|>pri"
    assert two.startswith(one)
    # suffix-first forms end with the prefix: there the middle simply extends it
    assert ft.get_template("codestral").render("a\n", "b", middle="pri") == "[SUFFIX]b[PREFIX]a\npri"
    assert ft.get_template("codellama-spm").render("", "b", middle="x") == "<PRE> <SUF>b <MID> x"
