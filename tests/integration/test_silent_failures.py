"""Failures that used to say nothing, or said it badly (issue 38), as a user sees them in a
real headless Neovim: one clear line each (in :messages, the whole text in the log), and a
status() that says what is going on instead of 'waiting'. The faulty servers are loopback
FAKES (tests/fakes/fake_server.py) that switch to the fault mid-session."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..fakes.fake_server import FakeServer, infill_stream, llama_props
from ..helpers import wait_for
from .nvim_session import Typist, lua, messages, suggestion, wait_ghost

pytestmark = pytest.mark.integration

LINES = ["def handler(request):", "    value = "]
HTML = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Proxy login</body></html>\n"
TRACES = ("Traceback", "Error executing", "E5108", "stack traceback", 'File "', "Error invoking")


def ours(nvim: Any) -> list[str]:
    text = messages(nvim)
    for bad in TRACES:
        assert bad not in text, text
    return [ln for ln in text.splitlines() if "local-copilot" in ln]


def status(nvim: Any) -> str:
    return lua(nvim, "require('local_copilot').status()")


class Switch:
    """A llama.cpp-shaped script; the test sets `answer` (status, steps[, headers]) mid-session."""

    def __init__(self) -> None:
        self.answer: tuple[Any, ...] = (200, infill_stream(["ok", "ay"]))

    def __call__(self, path: str, body: dict[str, Any]) -> tuple[Any, ...]:
        if path == "/props":
            return 200, llama_props()
        status, steps, *headers = self.answer
        return (status, list(steps), *headers)


def completions(fake: FakeServer) -> int:
    return len([p for p, _ in fake.requests if p in ("/infill", "/completion")])


@pytest.fixture()
def editor(open_nvim: Callable[..., Any], tmp_path: Path) -> Callable[..., Any]:
    """conftest's open_nvim, editing a file of this test's."""

    def make(setup: dict[str, Any] | None = None) -> Any:
        nvim = open_nvim(setup)
        nvim.command(f"edit {tmp_path / 'faulty.py'}")
        return nvim

    return make


@pytest.fixture()
def healthy(editor: Callable[..., Any]) -> Iterator[Callable[[], tuple[Any, Typist, Switch, FakeServer]]]:
    """A session against a fake that answers "okay" until the test switches its answer."""
    fakes: list[FakeServer] = []

    def make() -> tuple[Any, Typist, Switch, FakeServer]:
        script = Switch()
        fake = FakeServer(script)
        fakes.append(fake)
        nvim = editor({"backends": {"llama.cpp": {"url": fake.url}}, "debounce_ms": 0, "speculative": False})
        typist = Typist(nvim)
        typist.start(LINES)
        typist.type("a")
        wait_ghost(nvim, lambda t: t == "okay")
        return nvim, typist, script, fake

    yield make
    for fake in fakes:
        fake.close()


@pytest.mark.parametrize(("url", "problem"), [
    ("127.0.0.1:8012", "has no http:// or https:// in front"),
    ("not a url", "has no http:// or https:// in front"),
    ("ftp://127.0.0.1:8012", "has ftp://, not http:// or https://"),
    ("http://127.0.0.1:99999", "has port '99999', not a number from 1 to 65535"),
])
def test_a_url_no_request_can_go_to_is_one_message_naming_the_option(url: str, problem: str, nvim_env: dict[str, str],
                                                                      editor: Callable[..., Any]) -> None:
    nvim = editor({"backends": {"llama.cpp": {"url": url}}, "debounce_ms": 0, "log_level": "debug"})
    typist = Typist(nvim)
    typist.start(LINES)
    typist.type("abc")
    said = wait_for(lambda: ours(nvim), what="a message")
    expected = (f"local-copilot: bad option: `$.backends.llama.cpp.url` = {url!r} {problem}; "
                "e.g. 'http://127.0.0.1:8012'")
    assert said == [expected], said
    assert status(nvim) == "bad option"  # not 'waiting' for an answer that never comes
    typist.type("de")
    assert ours(nvim) == [expected]  # once, not per key
    assert status(nvim) == "bad option"
    log = Path(nvim_env["LOCAL_COPILOT_LOG_DIR"]) / "local_copilot.log"
    wait_for(lambda: "backends.llama.cpp.url" in log.read_text(), what="the bad option in the log")
    assert nvim.current.buffer[:] == LINES[:-1] + [LINES[-1] + "abcde"]


@pytest.mark.parametrize("ctype", ["text/html", "text/event-stream"])
def test_html_mid_session_is_one_message_and_an_error_in_the_counts(ctype: str, healthy: Callable[..., Any]) -> None:
    nvim, typist, script, fake = healthy()
    script.answer = (200, [HTML], {"content-type": ctype})  # a proxy's login page from now on
    typist.type("bcd")
    said = wait_for(lambda: ours(nvim), what="a message")
    assert said == [f"local-copilot: llama.cpp: the server at {fake.url} answered HTML, not a completion stream"
                    " (is that address the model server's, not a proxy's or a web page's?)"], said
    wait_for(lambda: status(nvim) == "backend down", what="status 'backend down'")
    assert suggestion(nvim) in (None, "")  # nothing of the page is shown
    shown = nvim.exec_lua("return vim.fn.execute('LocalCopilot status')")
    errors = int(re.search(r"errors (\d+)", shown).group(1))  # type: ignore[union-attr]
    assert errors >= 1, shown
    assert len(ours(nvim)) == 1
    # the server is good again: ghost text comes back by itself
    script.answer = (200, infill_stream(["ok", "ay"]))
    typist.type("k")
    wait_ghost(nvim, lambda t: t == "okay")


def test_a_redirect_says_where_and_what_to_set(healthy: Callable[..., Any]) -> None:
    nvim, typist, script, fake = healthy()
    script.answer = (302, [b""], {"location": "https://llm.example.org/v2/infill"})
    typist.type("b")
    said = wait_for(lambda: ours(nvim), what="a message")
    assert said == [f"local-copilot: llama.cpp: the server at {fake.url} redirected to "
                    "https://llm.example.org/v2/infill (HTTP 302); set backends.llama.cpp.url to the final address"
                    " (redirects are not followed)"], said
    assert status(nvim) == "backend down"


def test_retry_after_holds_requests_back_says_until_when_and_resumes_by_itself(healthy: Callable[..., Any]) -> None:
    nvim, typist, script, fake = healthy()
    script.answer = (429, [b'{"error":{"code":429,"message":"too many requests"}}'], {"retry-after": "3"})
    before = completions(fake)
    typist.type("b")
    said = wait_for(lambda: ours(nvim), what="a message")
    asked = time.time()
    assert len(said) == 1 and said[0].startswith("local-copilot: llama.cpp: HTTP 429: too many requests;"
                                                 " no requests to it until "), said
    until = wait_for(lambda: re.fullmatch(r"waiting for the server until (\d\d:\d\d:\d\d)", status(nvim)),
                     what="status: waiting for the server until")
    assert until.group(1) in said[0]
    script.answer = (200, infill_stream(["ok", "ay"]))  # good again, but it asked for 3 s
    for _ in range(4):  # a key while the wait lasts: nothing reaches the server
        typist.type("c")
        time.sleep(0.25)  # (the typing pace: each key is a request when nothing holds it back)
    assert time.time() - asked < 3
    assert completions(fake) == before + 1, fake.requests[-3:]
    assert status(nvim).startswith("waiting for the server until ")
    # the wait is over: the suggestion comes without another key
    wait_ghost(nvim, lambda t: t == "okay", timeout=10)
    assert time.time() - asked >= 2.5
    assert completions(fake) == before + 2
    assert status(nvim) == "showing 1/1"
    assert len(ours(nvim)) == 1


@pytest.mark.parametrize(("opts", "said"), [
    (5, "local-copilot: bad option: setup() takes a table of options, e.g. setup({ backend = 'llama.cpp' }); not 5"),
    ("fast", "local-copilot: bad option: setup() takes a table of options, e.g. setup({ backend = 'llama.cpp' });"
             ' not "fast"'),
    ({"keymaps": {"accept": 123}}, "local-copilot: bad option: keymaps.accept must be a key such as '<Tab>', or false,"
                                   " not 123"),
    ({"next_edit": 5}, "local-copilot: bad option: next_edit must be a table, not 5"),
    ({"context": {"lines_before": "many"}}, 'local-copilot: bad option: context.lines_before must be a number, not "many"'),
    ({"debounce_ms": "20"}, 'local-copilot: bad option: debounce_ms must be a number, not "20"'),
    ({"filetypes": {"python": "yes"}}, 'local-copilot: bad option: filetypes.python must be true or false, not "yes"'),
])
def test_a_wrong_type_given_to_setup_is_one_message_naming_it_never_a_traceback(opts: Any, said: str,
                                                                               editor: Callable[..., Any]) -> None:
    nvim = editor()
    ok = nvim.exec_lua("return (pcall(require('local_copilot').setup, ...))", opts)
    assert ok is True  # no Lua error reaches the caller (a stack trace in the user's init.lua)
    assert ours(nvim) == [said]
    assert status(nvim) == "bad option"
    typist = Typist(nvim)  # typing goes on, without an error per key
    typist.start(LINES)
    typist.type("ab")
    nvim.command("stopinsert")
    assert ours(nvim) == [said]
    assert status(nvim) == "bad option"
    # good options again: the status says so no more
    nvim.exec_lua("require('local_copilot').setup({ backends = { ['llama.cpp'] = { url = 'http://127.0.0.1:9' } } })")
    assert status(nvim) != "bad option"


@pytest.mark.parametrize(("call", "args", "said"), [
    ("edit", [5], "local-copilot: edit() takes a table such as { line1 = 1, line2 = 3, instruction = 'add types' };"
                  " not 5"),
    ("edit", [{"line1": "1", "instruction": "x"}], 'local-copilot: edit: line1 must be a number, not "1"'),
    ("edit", [{"line1": 1, "line2": 2, "instruction": 7}], "local-copilot: edit: instruction must be a string, not 7"),
    ("edit", [{"line1": 1, "buf": 9999, "instruction": "x"}], "local-copilot: edit: buf 9999 is not a buffer"),
    ("edit_follow_up", [{"x": 1}], "local-copilot: edit_follow_up: the instruction must be a string, not a table"),
])
def test_a_wrong_argument_to_a_public_function_is_one_message_naming_it(call: str, args: list[Any], said: str,
                                                                       editor: Callable[..., Any]) -> None:
    nvim = editor()
    nvim.current.buffer[:] = LINES
    ok, result = nvim.exec_lua(f"return {{ pcall(require('local_copilot').{call}, ...) }}", *args)
    assert ok is True  # no Lua error reaches the caller (a stack trace under the user's mapping)
    assert result is False
    wait_for(lambda: ours(nvim) == [said], what=f"the message {said!r}", timeout=5)


def test_after_options_setup_rejects_nothing_is_asked_with_the_old_ones(healthy: Callable[..., Any]) -> None:
    nvim, typist, script, fake = healthy()
    before = completions(fake)
    assert nvim.exec_lua("return (pcall(require('local_copilot').setup, { debounce_ms = '20' }))") is True
    typist.type("bcd")
    nvim.command("redraw")
    assert status(nvim) == "bad option"
    assert suggestion(nvim) in (None, "")  # no suggestion under the status that says the options are bad
    assert completions(fake) == before
    assert ours(nvim) == ['local-copilot: bad option: debounce_ms must be a number, not "20"']
    # good options again: suggestions come back
    nvim.exec_lua("require('local_copilot').setup(...)", {"backends": {"llama.cpp": {"url": fake.url}},
                                                         "debounce_ms": 0, "speculative": False})
    typist.type("e")
    wait_ghost(nvim, lambda t: t == "okay")
