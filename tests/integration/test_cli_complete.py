"""`local-copilot complete FILE:LINE:COL`: the suggestion the editor would show, from the
terminal, against the real llama-server (the phrase model writes PHRASE)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from local_copilot.cli import main as cli
from local_copilot.servers.llama_cpp import LlamaServer

from ..conftest import PHRASE
from ..fakes.fake_server import FakeServer
from ..fakes.recording_proxy import RecordingProxy
from .nvim_session import REPO

pytestmark = pytest.mark.integration


def _config(tmp_path: Path, url: str) -> str:
    # the phrase model is asked through /infill, as the editor's tests ask it
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"backends": {"llama.cpp": {"url": url, "endpoint": "infill"}}}))
    return str(path)


def test_prints_the_suggestion_for_a_spot_and_sends_the_file_around_it(
        tmp_path: Path, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    src = tmp_path / "job.py"
    src.write_text("import os\n\ndef main():\n\t\n\treturn 0\n")
    assert cli.main(["complete", f"{src}:4:2", "--config", _config(tmp_path, proxy.url)]) == 0
    out = capsys.readouterr()
    assert out.out == PHRASE + "\n" and out.err == ""
    body = proxy.bodies("/infill")[0]
    # the cursor sits after the tab of line 4: the text above, the line so far, the text below
    assert body["input_prefix"] == "import os\n\ndef main():\n"
    assert body["prompt"] == "\t"
    assert body["input_suffix"] == "\n\treturn 0"


def test_a_column_inside_a_character_of_several_bytes_is_the_characters_start(
        tmp_path: Path, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """COL counts bytes, as Neovim's col('.'): one inside a character ('\u20ac' is 3 bytes) is
    that character's start, never a place after the characters that follow it."""
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    src = tmp_path / "price.py"
    src.write_text("def f():\n\tname = '\u20acuro'\n")  # the euro sign: bytes 10 to 12 of line 2
    for col in (10, 11, 12):
        assert cli.main(["complete", f"{src}:2:{col}", "--config", _config(tmp_path, proxy.url)]) == 0
        capsys.readouterr()
        body = proxy.bodies("/infill")[-1]
        assert (body["prompt"], body["input_suffix"]) == ("\tname = '", "\u20acuro'"), col


def test_the_window_is_sized_from_the_speed_the_server_shows(
        tmp_path: Path, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A one-shot engine has measured nothing: a warm-up (nothing generated) measures the
    server first, and the tiny server's speed affords as much of the window as its context
    holds, not the share a CPU's assumed speed would (the editor sends the same once it has
    measured the server)."""
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    src = tmp_path / "long.py"
    src.write_text("".join(f"value_{i} = compute(value_{i - 1}, {i})  # step {i}\n" for i in range(400)))
    assert cli.main(["complete", f"{src}:380:1", "--config", _config(tmp_path, proxy.url)]) == 0
    assert capsys.readouterr().out.startswith(PHRASE.split("\n")[0])
    asked = proxy.bodies("/infill")
    assert len(asked) >= 2 and asked[0]["n_predict"] == 0 and all(b["n_predict"] > 0 for b in asked[1:])
    # a CPU's assumed speed affords ~256 tokens (11 of these lines); this server's speed
    # affords all its context per slot (4096 tokens) holds of the 200 lines above
    assert asked[1]["input_prefix"].count("\n") > 50


def test_json_and_standard_input_as_a_user_runs_it(tmp_path: Path, phrase_server: LlamaServer) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "python"), "LOCAL_COPILOT_LOG_DIR": str(tmp_path)}
    res = subprocess.run([sys.executable, "-m", "local_copilot.cli", "complete", "-", "--json",
                          "--config", _config(tmp_path, phrase_server.url)],
                         input="def f():\n\t", capture_output=True, text=True, env=env, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert answer["backend"] == "llama.cpp" and answer["text"] == PHRASE and answer["seconds"] > 0


def test_a_server_that_is_not_there_is_one_line_on_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path))
    src = tmp_path / "a.py"
    src.write_text("x = 1\n")
    assert cli.main(["complete", str(src), "--url", "http://127.0.0.1:9"]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines() == ["local-copilot: llama.cpp: cannot reach http://127.0.0.1:9 (ConnectError) "
                                    "(is its server running? `local-copilot status llama.cpp`)"]


def test_a_loading_server_is_said_so_without_the_not_running_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # the hint goes with the failure's kind (no connection at all), not with its wording
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path))
    server = FakeServer(lambda path, body: (503, [b'{"error":{"code":503,"message":"Loading model"}}']))
    try:
        src = tmp_path / "a.py"
        src.write_text("x = 1\n")
        assert cli.main(["complete", str(src), "--url", server.url]) == 1
    finally:
        server.close()
    err = capsys.readouterr().err
    assert err.startswith("local-copilot: llama.cpp: server not ready (503") and "is its server running" not in err, err


@pytest.mark.parametrize(("spot", "message"), [
    (":9", "line 9 is not in the file (it has 1 lines)"),
    (":1:8", "column 8 is not on line 1 (it has 5 bytes; 6 is its end)"),
])
def test_a_spot_outside_the_file_says_where_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  spot: str, message: str) -> None:
    src = tmp_path / "a.py"
    src.write_text("x = 1\n")
    assert cli.main(["complete", f"{src}{spot}", "--url", "http://127.0.0.1:9"]) == 1
    assert capsys.readouterr().err == f"local-copilot: {message}\n"


def test_a_file_another_ai_tools_ignore_file_lists_sends_nothing(
        tmp_path: Path, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # a project that tells JetBrains' assistant to leave its internals alone (.aiignore at the
    # root, the file two directories down) tells this plugin too
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    (tmp_path / "pkg" / "core").mkdir(parents=True)
    (tmp_path / ".aiignore").write_text("*.internal.py\n")
    src = tmp_path / "pkg" / "core" / "billing.internal.py"
    src.write_text("RATE = 0.17\n\ndef charge(x):\n    \n")
    assert cli.main(["complete", f"{src}:4:5", "--config", _config(tmp_path, proxy.url)]) != 0
    err = capsys.readouterr().err
    assert f"listed in {tmp_path / '.aiignore'}" in err
    assert proxy.bodies("/infill") == [] and proxy.bodies("/completion") == []
