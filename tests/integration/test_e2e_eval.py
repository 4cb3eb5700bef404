"""A handful of bench/e2e_eval.py's cases, so the end-to-end evaluation keeps working: the
real plugin in a real headless Neovim, the text before the cursor typed key by key, the
suggestion accepted with accept(), the buffer compared with the original file. Answers
come from the evaluation's FAKE llama-server, which knows the file (true middle + junk)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from .nvim_session import REPO

sys.path.insert(0, str(REPO))
from bench.e2e_eval import Editor, OracleServer, make_case

pytestmark = pytest.mark.integration

SOURCE = [
    "import textwrap",
    "",
    "",
    "def build(parser, option_string, chunks):",
    "    parser.append(option_string)",
    "    wrapper = textwrap.TextWrapper(width=70, break_on_hyphens=True,",
    "                                   drop_whitespace=False)",
    "    for chunk in chunks:",
    "        total = len(chunk) + 1",
    "    return wrapper",
]


@pytest.fixture(scope="module", params=["completion", "infill"])
def editor(request: Any, nvim_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Editor, OracleServer]]:
    server = OracleServer(request.param)
    ed = Editor(server, tmp_path_factory.mktemp("e2e"))
    yield ed, server
    ed.close()
    server.close()


CASES = [
    # the first kind: the cursor inside a word, the answer runs through the rest of the line
    ("in_word", "rest_of_line", (5, 45), (5, 49), (5, 58)),
    # the second: `(` typed over a suggestion computed before it, `)` already after the cursor
    ("after_opener", "closer", (4, 11), (4, 18), (4, 31)),
    ("before_closer", "rest_of_line", (8, 18), (8, 20), (8, 25)),
    ("line_end", "next_lines", (7, 8), (7, 12), (8, 30)),
    ("blank_line", "dedent", (7, 24), (8, 8), (8, 30)),
    # nothing is missing and the answer repeats the line above: nothing is shown
    ("complete", "line_above", (8, 25), (8, 30), (8, 30)),
]


@pytest.mark.parametrize("burst", [False, True], ids=["paced", "burst"])
@pytest.mark.parametrize(("kind", "junk", "a", "c", "b"), CASES, ids=[c[0] for c in CASES])
def test_the_buffer_after_accept_is_the_original(editor: tuple[Editor, OracleServer], kind: str, junk: str,
                                                 a: tuple[int, int], c: tuple[int, int], b: tuple[int, int],
                                                 burst: bool) -> None:
    ed, server = editor
    case = make_case(kind, junk, "sample.py", SOURCE, a, c, b, burst=burst)
    server.set_case(case)
    out = ed.run(case)
    assert out.buffer == SOURCE, (case.typed, case.middle, case.extra, out.shown)
    if kind == "complete":
        assert out.shown is None
        assert ed.nvim.call("LocalCopilotCall", "status")["stats"]["counters"].get("quiet", 0) >= 1
    else:
        assert out.shown == case.middle
