"""Evaluate the completion post-processing pipeline on real code nobody here wrote.

Cursor positions are sampled from CPython's standard library sources on this
machine (``sysconfig.get_paths()["stdlib"]``; *.py, sorted, test dirs and
site-packages skipped, undecodable/untokenizable files skipped):

(a) ``eol_block``  - the end of a line; the true middle is the rest of the block
    (1-6 lines, up to the first line indented less than the block).
(b) ``mid_bracket`` - inside a bracket pair on one line; the true middle runs up
    to the closing bracket, so the text after the cursor starts with it.
(c) ``eol_line``   - inside a line; the true middle is the rest of that line.

The "model" answer is the true middle plus one kind of junk real models emit,
chosen deterministically per case: the existing text after the cursor repeated,
an extra closing bracket, dedented lines of a next block, a line repeated in a
loop, trailing blank lines, or nothing.  Each answer goes through
``process(answer, ctx, final=True)`` and through a simulated stream (random
chunks with ``final=False``, then ``final=True``).

Usage: python bench/postprocess_eval.py [--n 2000] [--seed 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import re
import sys
import sysconfig
import time
import tokenize
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT / "python") not in sys.path:
    sys.path.insert(0, str(_ROOT / "python"))

from local_copilot.pipeline.postprocess import PostContext, process  # noqa: E402

WINDOW = 40  # lines of context before/after, like the engine's default-sized window
CASE_KINDS = ("eol_block", "mid_bracket", "eol_line")
JUNK_KINDS = ("none", "suffix_repeat", "extra_bracket", "dedent_lines", "repeat_line", "trailing_blank")
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}
_STMT_RE = re.compile(r"[A-Za-z_]")


@dataclass(frozen=True)
class Case:
    kind: str
    path: str
    row: int  # 1-based cursor row
    ctx: PostContext
    truth: str
    # material for junk
    full_line: str  # the whole cursor line as it is in the file
    block_indent: int  # indent of the block the true middle belongs to (0 = top level)
    header_indent: int | None  # indent of a line above with less indent than the block
    last_truth_line: str
    dedent_pool: tuple[str, ...]  # statement-like lines of the file (stripped)
    ends_in_comment: bool = False  # the true middle ends with a # comment


@dataclass
class Outcome:
    case: Case
    junk: str
    answer: str
    output: str
    exact: bool
    raw_exact: bool
    worse: bool
    stream_violations: int
    retractions: int
    calls: int


# --------------------------------------------------------------------------- sources


def stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).parts
        if any(part in _SKIP_DIRS or part.startswith("test_") for part in rel[:-1]):
            continue
        if rel[-1].startswith("test_"):
            continue
        out.append(p)
    return out


def _indent(line: str) -> int:
    lead = line[: len(line) - len(line.lstrip(" \t"))]
    return len(lead.expandtabs(8))


def _blank(line: str) -> bool:
    return not line.strip()


@dataclass
class FileInfo:
    path: str
    lines: list[str]
    start_in_str: set[int] = field(default_factory=set)  # rows starting inside a string
    end_in_str: set[int] = field(default_factory=set)  # rows ending inside a string
    newline_rows: set[int] = field(default_factory=set)  # rows ending a logical line
    stmt_start: dict[int, int] = field(default_factory=dict)
    last_code: dict[int, str] = field(default_factory=dict)  # last code token per row
    row_tokens: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    pairs: list[tuple[int, int, int, list[int]]] = field(default_factory=list)
    comment_rows: set[int] = field(default_factory=set)


def analyse(path: Path) -> FileInfo | None:
    try:
        src = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    src = src.replace("\r\n", "\n")
    lines = src.split("\n")
    info = FileInfo(str(path), lines)
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    skip = {tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}
    cur: int | None = None
    stack: list[tuple[tokenize.TokenInfo, list[int]]] = []
    for tok in toks:
        (sr, sc), er = tok.start, tok.end[0]
        if tok.type == tokenize.COMMENT:
            info.comment_rows.add(sr)
        if tok.type == tokenize.STRING and er > sr:
            info.start_in_str.update(range(sr + 1, er + 1))
            info.end_in_str.update(range(sr, er))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                            tokenize.ENDMARKER, tokenize.ENCODING):
            info.row_tokens[sr].append(sc)
            if stack and tok.start[0] == stack[-1][0].start[0]:
                stack[-1][1].append(sc)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.ENDMARKER,
                            tokenize.INDENT, tokenize.DEDENT):
            info.last_code[er] = tok.string
        if tok.type == tokenize.OP and tok.string in "([{":
            stack.append((tok, []))
        elif tok.type == tokenize.OP and tok.string in ")]}" and stack:
            open_tok, inner = stack.pop()
            if open_tok.start[0] == sr:
                info.pairs.append((sr, open_tok.end[1], sc, [c for c in inner if c < sc]))
        if tok.type in skip and cur is None:
            continue
        if tok.type == tokenize.ENDMARKER:
            break
        if cur is None:
            cur = sr
        if tok.type == tokenize.NEWLINE:
            for r in range(cur, sr + 1):
                info.stmt_start[r] = cur
            info.newline_rows.add(sr)
            cur = None
    return info


# --------------------------------------------------------------------------- cases


def _ctx(info: FileInfo, row: int, prefix: str, suffix: str, after: int) -> PostContext:
    """`after`: 0-based index of the first existing line below the middle."""
    lines = info.lines
    return PostContext(
        line_prefix=prefix,
        line_suffix=suffix,
        next_lines=tuple(lines[after : after + WINDOW]),
        prev_lines=tuple(lines[max(0, row - 1 - WINDOW) : row - 1]),
        tabstop=8,
        max_lines=16,
    )


def _header_indent(info: FileInfo, row: int, block: int) -> int | None:
    """Indent of the nearest statement above with less indent than the block (where
    code that leaves the block goes on)."""
    for r in range(row, 0, -1):
        line = info.lines[r - 1]
        if info.stmt_start.get(r) == r and _indent(line) < block:
            return _indent(line)
    return None


def _clean(info: FileInfo, row: int) -> bool:
    return row not in info.start_in_str and row not in info.end_in_str


def eol_block_cases(info: FileInfo, pool: tuple[str, ...]) -> Iterator[Case]:
    lines = info.lines
    n = len(lines)
    for r in range(1, n + 1):
        line = lines[r - 1]
        if _blank(line) or not _clean(info, r):
            continue
        opener = info.last_code.get(r) in ("(", "[", "{") and r not in info.newline_rows
        if r not in info.newline_rows and not opener:
            continue
        j = r + 1
        while j <= n and _blank(lines[j - 1]):
            j += 1
        if j > n or j in info.start_in_str:
            continue
        stmt = info.stmt_start.get(r)
        below = _indent(lines[j - 1])
        if r in info.newline_rows and info.last_code.get(r) == ":":
            # a compound statement header: the block is its suite (which may be no
            # deeper than a continuation line of the header itself)
            if stmt is None or below <= _indent(lines[stmt - 1]) or j in info.comment_rows:
                continue
            block = below
        elif opener:
            if below <= _indent(line):
                continue
            block = below
        elif stmt is not None:
            block = _indent(lines[stmt - 1])
        else:
            continue
        k = r + 1
        while k <= n and (_blank(lines[k - 1]) or _indent(lines[k - 1]) >= block):
            k += 1
        last = k - 1
        while last > r and _blank(lines[last - 1]):
            last -= 1
        if not 1 <= last - r <= 6:
            continue
        if any(x in info.start_in_str for x in range(r + 1, min(k, n) + 1)):
            continue
        truth = "\n" + "\n".join(lines[r:last])
        yield Case(
            kind="eol_block", path=info.path, row=r,
            ctx=_ctx(info, r, line, "", last),
            truth=truth, full_line=line, block_indent=block,
            header_indent=_header_indent(info, r, block),
            last_truth_line=lines[last - 1], dedent_pool=pool,
            ends_in_comment=last in info.comment_rows,
        )


def mid_bracket_cases(info: FileInfo, pool: tuple[str, ...], rng: random.Random) -> Iterator[Case]:
    for row, open_end, close_col, inner in info.pairs:
        if not _clean(info, row):
            continue
        line = info.lines[row - 1]
        cur = rng.choice([open_end, *inner]) if inner else open_end
        truth = line[cur:close_col]
        if not truth.strip():
            continue
        block = _indent(info.lines[info.stmt_start.get(row, row) - 1])
        yield Case(
            kind="mid_bracket", path=info.path, row=row,
            ctx=_ctx(info, row, line[:cur], line[close_col:], row),
            truth=truth, full_line=line, block_indent=block,
            header_indent=_header_indent(info, row, block),
            last_truth_line=line, dedent_pool=pool,
        )


def eol_line_cases(info: FileInfo, pool: tuple[str, ...], rng: random.Random) -> Iterator[Case]:
    for row in sorted(info.row_tokens):
        cols = info.row_tokens[row]
        if row > len(info.lines) or len(cols) < 2 or not _clean(info, row):
            continue
        line = info.lines[row - 1]
        cur = rng.choice(cols[1:])
        truth = line[cur:].rstrip()
        if not truth.strip():
            continue
        block = _indent(info.lines[info.stmt_start.get(row, row) - 1])
        yield Case(
            kind="eol_line", path=info.path, row=row,
            ctx=_ctx(info, row, line[:cur], "", row),
            truth=truth, full_line=line, block_indent=block,
            header_indent=_header_indent(info, row, block) if block else None,
            last_truth_line=line, dedent_pool=pool,
            ends_in_comment=row in info.comment_rows,
        )


def _pool(info: FileInfo) -> tuple[str, ...]:
    out = []
    for r, line in enumerate(info.lines, 1):
        s = line.strip()
        # one-line statements only: junk lines must stand on their own
        if s and _STMT_RE.match(s) and _clean(info, r) and info.stmt_start.get(r) == r \
                and r in info.newline_rows:
            out.append(s)
    return tuple(out)


def sample_cases(n: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    files = stdlib_files()
    rng.shuffle(files)
    # one case per kind and file while that suffices: spread over as many files as possible
    per_kind = max(1, -(-n // (3 * len(files))))
    cases: list[Case] = []
    for path in files:
        if len(cases) >= n:
            break
        info = analyse(path)
        if info is None:
            continue
        pool = _pool(info)
        gens = (
            list(eol_block_cases(info, pool)),
            list(mid_bracket_cases(info, pool, rng)),
            list(eol_line_cases(info, pool, rng)),
        )
        for cands in gens:
            take = min(len(cands), per_kind, n - len(cases))
            if take > 0:
                cases.extend(rng.sample(cands, take))
    return cases


# --------------------------------------------------------------------------- junk


def _junk_options(case: Case) -> list[str]:
    ctx = case.ctx
    nxt = next((ln for ln in ctx.next_lines if ln.strip()), None)
    opts = ["none", "repeat_line", "trailing_blank"]
    if case.kind == "mid_bracket" or nxt is not None:
        opts.append("suffix_repeat")
    # (a model closes the bracket itself; it does not put the closer in a comment)
    if case.kind == "mid_bracket" or (
        nxt is not None and nxt.lstrip()[:1] in (")", "]", "}") and not case.ends_in_comment
    ):
        opts.append("extra_bracket")
    if (case.kind == "mid_bracket" or case.header_indent is not None) and case.dedent_pool:
        opts.append("dedent_lines")
    return opts


def make_answer(case: Case, rng: random.Random) -> tuple[str, str]:
    junk = rng.choice(_junk_options(case))
    t, ctx = case.truth, case.ctx
    if junk == "none":
        return junk, t
    if junk == "trailing_blank":
        pad = rng.choice(["", " " * case.block_indent, "\t"])
        return junk, t + "".join("\n" + rng.choice(["", pad]) for _ in range(rng.randint(1, 3)))
    if junk == "repeat_line":
        # a small model stuck in a loop re-emits the line it just wrote
        line = case.last_truth_line if case.kind == "eol_block" else case.full_line
        return junk, t + ("\n" + line) * rng.randint(2, 4)
    if junk == "suffix_repeat":
        if case.kind == "mid_bracket":
            more = "\n" + ctx.next_lines[0] if ctx.next_lines and rng.random() < 0.5 else ""
            return junk, t + ctx.line_suffix + more
        first = next(i for i, ln in enumerate(ctx.next_lines) if ln.strip())
        upto = min(len(ctx.next_lines), first + 1 + rng.randint(0, 2))
        return junk, t + "\n" + "\n".join(ctx.next_lines[:upto])
    if junk == "extra_bracket":
        if case.kind == "mid_bracket":
            return junk, t + ctx.line_suffix[0]
        below = next(ln for ln in ctx.next_lines if ln.strip())
        return junk, t + below.lstrip()[0]
    # dedent_lines: the model finishes the block and goes on with code of an outer one
    nxt = next((ln.strip() for ln in ctx.next_lines if ln.strip()), None)
    pool = [s for s in case.dedent_pool if s != nxt] or list(case.dedent_pool)
    ind = " " * (case.header_indent or 0)
    body = [ind + rng.choice(pool) for _ in range(rng.randint(1, 3))]
    gap = "\n" if rng.random() < 0.3 else ""
    return junk, t + "\n" + gap + "\n".join(body)


# --------------------------------------------------------------------------- scoring


def normalize(s: str) -> str:
    return "\n".join(line.rstrip() for line in s.split("\n")).rstrip()


def edit_distance(a: str, b: str) -> int:
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    a, b = a[i:], b[i:]
    j = 0
    while j < len(a) and j < len(b) and a[-1 - j] == b[-1 - j]:
        j += 1
    if j:
        a, b = a[:-j], b[:-j]
    if not a or not b:
        return len(a) + len(b)
    prev = list(range(len(b) + 1))
    for x, ca in enumerate(a, 1):
        cur = [x]
        for y, cb in enumerate(b, 1):
            cur.append(min(prev[y] + 1, cur[y - 1] + 1, prev[y - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def run_case(case: Case, rng: random.Random) -> Outcome:
    junk, answer = make_answer(case, rng)
    ctx = case.ctx
    out = process(answer, ctx, final=True).text
    # streaming: random chunks; the caller stops at done=True
    violations = retractions = 0
    calls = 1
    pos, last_shown = 0, ""
    streamed: str | None = None
    while pos < len(answer):
        pos = min(len(answer), pos + rng.randint(1, 8))
        res = process(answer[:pos], ctx, final=False)
        calls += 1
        if not out.startswith(res.text):
            violations += 1
        if not res.text.startswith(last_shown):
            retractions += 1
        last_shown = res.text
        if res.done:
            streamed = res.text
            break
    if streamed is None:
        calls += 1
        streamed = process(answer, ctx, final=True).text
    if streamed != out:
        violations += 1
    truth_n = normalize(case.truth)
    exact = normalize(out) == truth_n
    raw_exact = normalize(answer) == truth_n
    worse = (raw_exact and not exact) or (
        edit_distance(normalize(out), truth_n) > edit_distance(normalize(answer), truth_n)
    )
    return Outcome(case, junk, answer, out, exact, raw_exact, worse, violations, retractions, calls)


def evaluate(n: int = 2000, seed: int = 0) -> tuple[dict[str, Any], list[Outcome]]:
    t0 = time.perf_counter()
    cases = sample_cases(n, seed)
    t1 = time.perf_counter()
    outcomes = [run_case(c, random.Random(f"{seed}:{i}")) for i, c in enumerate(cases)]
    t2 = time.perf_counter()
    calls = sum(o.calls for o in outcomes)

    def agg(items: list[Outcome]) -> dict[str, float | int]:
        m = len(items) or 1
        return {
            "n": len(items),
            "exact": sum(o.exact for o in items) / m,
            "raw_exact": sum(o.raw_exact for o in items) / m,
            "worse": sum(o.worse for o in items),
            "stream_violations": sum(o.stream_violations for o in items),
            "retractions": sum(o.retractions for o in items),
        }

    summary: dict[str, Any] = {
        "n": len(outcomes),
        "seed": seed,
        "overall": agg(outcomes),
        "by_case": {k: agg([o for o in outcomes if o.case.kind == k]) for k in CASE_KINDS},
        "by_junk": {k: agg([o for o in outcomes if o.junk == k]) for k in JUNK_KINDS},
        "process_calls": calls,
        "us_per_call": (t2 - t1) / max(1, calls) * 1e6,
        "sampling_s": t1 - t0,
        "files": len({o.case.path for o in outcomes}),
    }
    return summary, outcomes


def _table(summary: dict[str, Any]) -> str:
    rows = [("overall", summary["overall"])]
    rows += [(f"case {k}", v) for k, v in summary["by_case"].items()]
    rows += [(f"junk {k}", v) for k, v in summary["by_junk"].items()]
    head = f"{'':22} {'n':>5} {'exact':>7} {'raw exact':>9} {'worse':>5} {'stream viol':>11} {'retract':>7}"
    out = [head, "-" * len(head)]
    for name, r in rows:
        out.append(
            f"{name:22} {r['n']:>5} {r['exact']:>7.1%} {r['raw_exact']:>9.1%} {r['worse']:>5} "
            f"{r['stream_violations']:>11} {r['retractions']:>7}"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="number of cases (default 2000)")
    ap.add_argument("--seed", type=int, default=0, help="sampling/junk/chunking seed (default 0)")
    ap.add_argument("--json", type=Path, help="write the summary and up to 200 failures here")
    ap.add_argument("--show", type=int, default=0, help="print this many non-exact cases")
    args = ap.parse_args(argv)
    summary, outcomes = evaluate(args.n, args.seed)
    print(_table(summary))
    print(
        f"\n{summary['n']} cases from {summary['files']} stdlib files, seed {summary['seed']}; "
        f"{summary['process_calls']} process() calls, {summary['us_per_call']:.1f} us/call"
    )
    bad = [o for o in outcomes if not o.exact or o.worse or o.stream_violations]
    for o in bad[: args.show]:
        print(f"\n--- {o.case.kind}/{o.junk} {o.case.path}:{o.case.row} worse={o.worse} "
              f"viol={o.stream_violations}")
        print("prefix:", repr(o.case.ctx.line_prefix), "suffix:", repr(o.case.ctx.line_suffix))
        print("truth: ", repr(o.case.truth))
        print("answer:", repr(o.answer))
        print("output:", repr(o.output))
    if args.json:
        failures = [
            {"kind": o.case.kind, "junk": o.junk, "path": o.case.path, "row": o.case.row,
             "truth": o.case.truth, "answer": o.answer, "output": o.output, "worse": o.worse,
             "stream_violations": o.stream_violations}
            for o in bad[:200]
        ]
        args.json.write_text(json.dumps({**summary, "failures": failures}, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
