"""Issue 38, in a real headless Neovim against a loopback FAKE server: an answer holding another
model family's special token shows (and <Tab> inserts) the text before the token and nothing of
it, even when the token comes split over chunks; an answer holding an invisible character is
not shown, and <Tab> inserts no part of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..fakes.fake_server import QWEN_FIM, FakeServer, infill_stream, llama_props
from ..helpers import wait_for
from .nvim_session import Typist, ghost_text, lua, start_nvim, suggestion, wait_ghost

pytestmark = pytest.mark.integration

LINES = ["def handler(request):", "    value = "]


class FakeServerTypist(Typist):
    """A Typist who also sees the fake server's requests and the plugin's status."""

    def __init__(self, nvim: Any, fake: FakeServer, endpoint: str) -> None:
        super().__init__(nvim)
        self.fake, self.endpoint = fake, endpoint

    def requests(self) -> int:
        return len([p for p, _ in self.fake.requests if p in ("/infill", "/completion")])

    def sent(self, n: int) -> None:
        wait_for(lambda: self.requests() > n, what="the request after the key reached the server")
        assert self.fake.requests[-1][0] == "/" + self.endpoint

    def final(self) -> None:
        """The shown suggestion is the whole answer's, not a streamed part of it."""
        wait_for(lambda: lua(self.nvim, "require('local_copilot.ghost').current and "
                                        "require('local_copilot.ghost').current.final") is True, what="a final answer")

    def idle(self) -> None:
        """The answer came and was judged: nothing shown, nothing waiting."""
        wait_for(lambda: lua(self.nvim, "require('local_copilot').status()") == "idle", what="status idle")


@pytest.fixture(params=["infill", "completion"])
def typist(request: pytest.FixtureRequest, nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
           tmp_path: Path) -> Iterator[FakeServerTypist]:
    # /infill: no template, so no own stop strings at all; /completion: the plugin renders Qwen's
    # template and cuts Qwen's tokens, and another family's are the ones in the answers below
    fake = FakeServer(answer([]))  # (an empty answer until a test says what the model writes)
    if request.param == "completion":
        fake.fim_tokens = QWEN_FIM
    setup = {"backends": {"llama.cpp": {"url": fake.url}}, "debounce_ms": 0, "adaptive_debounce": False,
             "speculative": False, "keymaps": {"accept": "<Tab>"}}
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup=setup)
    try:
        nvim.command(f"edit {tmp_path / 'sample.py'}")
        typist = FakeServerTypist(nvim, fake, request.param)
        typist.start(LINES)
        typist.idle()  # (whatever entering Insert mode asked for is answered: the counts start here)
        yield typist
    finally:
        nvim.close()
        fake.close()


def answer(chunks: list[str]) -> Any:
    return lambda path, body: (200, llama_props()) if path == "/props" else (200, infill_stream(chunks))


def test_the_answer_ends_at_another_familys_token_split_over_chunks(typist: FakeServerTypist) -> None:
    # Llama 3's end of turn, in pieces, then text the model wrote after it
    typist.fake.script = answer(["ok", "ay<|eo", "t_", "id|>", "\nimport os"])
    n = typist.requests()
    typist.type("a")
    typist.sent(n)
    wait_ghost(typist.nvim, lambda t: t == "okay")
    typist.final()
    assert suggestion(typist.nvim) == "okay"
    assert ghost_text(typist.nvim) == "okay"  # what the screen draws
    typist.nvim.input("<Tab>")
    wait_for(lambda: typist.last_line() == LINES[-1] + "aokay", what="the text before the token accepted")
    assert typist.nvim.current.buffer[:] == LINES[:-1] + [LINES[-1] + "aokay"]


def test_a_suggestion_with_an_invisible_character_is_not_shown_and_tab_inserts_none_of_it(typist: FakeServerTypist) -> None:
    typist.fake.script = answer(["ok", "\u200b", "ay"])
    n = typist.requests()
    typist.type("a")
    typist.sent(n)
    typist.idle()
    assert suggestion(typist.nvim) in (None, "")
    before = typist.last_line()
    typist.nvim.input("<Tab>")  # nothing shown: the key does what it does without the plugin
    wait_for(lambda: typist.last_line() != before, what="<Tab> inserted something")
    text = "\n".join(typist.nvim.current.buffer[:])
    assert "\u200b" not in text and "okay" not in text, repr(text)
    assert typist.last_line().startswith(LINES[-1] + "a") and not typist.last_line()[len(LINES[-1]) + 1:].strip()
