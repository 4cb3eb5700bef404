"""One rule for where a document's lines end, on every path: `\\n`, `\\r\\n` and `\\r` (the
Language Server Protocol's), never the other characters `str.splitlines` breaks at (a form
feed, PEP 8's page break; U+2028). What the model server gets (the recording proxy in front of
the real tiny llama-server, whose phrase model writes PHRASE) holds the text as the user has it:

- `local-copilot lsp` with a raw stdio client: incremental edits after a form feed and a line
  separator, positions in UTF-16 units;
- `local-copilot complete FILE:LINE:COL` on files with CRLF and CR line ends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_copilot.cli import main as cli

from ..conftest import PHRASE
from ..fakes.recording_proxy import RecordingProxy
from .test_lsp import fills, options
from .test_lsp_protocol import RawClient

pytestmark = pytest.mark.integration


@pytest.fixture()
def raw_client(tmp_path: Path) -> Iterator[RawClient]:
    client = RawClient(tmp_path)
    yield client
    client.close()


def test_edits_after_a_form_feed_and_a_line_separator_land_where_the_client_put_them(
        raw_client: RawClient, proxy: RecordingProxy, tmp_path: Path) -> None:
    """^L (PEP 8's page break) and U+2028 are characters of their lines to the protocol (its
    line ends are \\n, \\r\\n and \\r); str.splitlines ends lines at both, which put the edits
    below them on other lines. Positions are UTF-16 units (the default encoding): the emoji
    counts two."""
    client = raw_client
    client.initialize(options(proxy.url), tmp_path)
    uri = (tmp_path / "paged.py").as_uri()
    text = "import os\n\x0c\n# page \U0001f600\u2028two\ndef main():\n\t\n\treturn 0\n"
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": text}})

    def edit(version: int, start: tuple[int, int], end: tuple[int, int], new: str) -> None:
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [
            {"range": {"start": {"line": start[0], "character": start[1]},
                       "end": {"line": end[0], "character": end[1]}}, "text": new}]})

    edit(2, (2, 13), (2, 13), "!")  # after the emoji (2 units) and U+2028: "# page 😀\u2028two!"
    edit(3, (3, 4), (3, 8), "run")  # main -> run
    edit(4, (4, 1), (4, 1), "x = 1\n\t")  # the body's first line, and the cursor's line after it
    rid = client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                     "position": {"line": 5, "character": 1}})
    assert client.answer(rid)["result"]["items"][0]["label"] == "run(a, b)"
    [sent] = fills(proxy)
    assert sent["input_prefix"] == "import os\n\x0c\n# page \U0001f600\u2028two!\ndef run():\n\tx = 1\n", sent
    assert sent["input_suffix"] == "\n\treturn 0", sent


@pytest.mark.parametrize("eol", ["\r\n", "\r"])
def test_the_cli_counts_crlf_and_cr_line_ends_as_an_editor_does(
        eol: str, tmp_path: Path, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """LINE:COL as Neovim shows the file (fileformat dos or mac): the line ends are no text of
    the lines, and a form feed stays one character of its line."""
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    src = tmp_path / "job.py"
    src.write_bytes(eol.join(["import os", "\x0c", "def main():", "\t", "\treturn 0", ""]).encode())
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"backends": {"llama.cpp": {"url": proxy.url, "endpoint": "infill"}}}))
    assert cli.main(["complete", f"{src}:4:2", "--config", str(config)]) == 0
    assert capsys.readouterr().out == PHRASE + "\n"
    body = proxy.bodies("/infill")[0]
    assert (body["input_prefix"], body["prompt"], body["input_suffix"]) == (
        "import os\n\x0c\ndef main():\n", "\t", "\n\treturn 0"), body
