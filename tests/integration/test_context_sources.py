"""Repository context from the code's structure: the issue's two-file project (`geometry.py`
defines `scale_points`, `main.py` imports it, `geometry.py` not open), completed where the
user calls it. What the real llama-server received holds the signature; the CLI says which
sources it used; a base model's prompt gets it as comments; an ignored file's never."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from local_copilot.cli import main as cli
from local_copilot.servers.llama_cpp import LlamaServer

from ..conftest import PHRASE
from ..fakes.recording_proxy import RecordingProxy
from ..helpers import wait_for
from .nvim_session import REPO, start_nvim, wait_ghost

pytestmark = pytest.mark.integration

GEOMETRY = '''"""Points in the plane."""


def scale_points(points, factor, *, origin=(0.0, 0.0)):
    """Each point moved away from `origin` by `factor`."""
    ox, oy = origin
    return [(ox + (x - ox) * factor, oy + (y - oy) * factor) for x, y in points]


def _unused(x):
    return x
'''

MAIN = '''from geometry import scale_points

corners = [(0, 0), (1, 0), (1, 1)]
bigger = scale_points(
'''


def make_project(tmp_path: Path, ignore: str = "", geometry: str = GEOMETRY) -> Path:
    """The issue's project: geometry.py (`geometry`), main.py calling its scale_points at the
    end, a `.git` marking the root, and `.aiignore` holding `ignore`; main.py's path."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "geometry.py").write_text(geometry)
    (tmp_path / "main.py").write_text(MAIN)
    if ignore:
        (tmp_path / ".aiignore").write_text(ignore)
    return tmp_path / "main.py"


def _config(tmp_path: Path, url: str, **entry: str) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"backends": {"llama.cpp": {"url": url, **entry}}}))
    return str(path)


def test_the_called_functions_signature_reaches_the_server_and_the_cli_lists_it(
        tmp_path: Path, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    main = make_project(tmp_path)
    assert cli.main(["complete", f"{main}:4:23", "--json", "--config",
                     _config(tmp_path, proxy.url, endpoint="infill")]) == 0
    answer = json.loads(capsys.readouterr().out)
    body = proxy.bodies("/infill")[-1]
    # llama-server's repository context: input_extra, each chunk with its file's name
    assert body["input_extra"] == [{"filename": "geometry.py",
                                    "text": "def scale_points(points, factor, *, origin=(0.0, 0.0)):\n    ...\n"}]
    assert body["input_prefix"].startswith("from geometry import scale_points")
    assert {"source": "imports", "file": "geometry.py"} in answer["context"]
    assert answer["context"][0]["source"] == "window"


def test_a_base_model_reads_the_signature_as_comments_before_the_file(
        tmp_path: Path, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    main = make_project(tmp_path)
    assert cli.main(["complete", f"{main}:4:23", "--config",
                     _config(tmp_path, proxy.url, prompt="continue")]) == 0
    capsys.readouterr()
    prompt = proxy.bodies("/completion")[-1]["prompt"]
    assert prompt.startswith("# geometry.py:\n# def scale_points(points, factor, *, origin=(0.0, 0.0)):\n#     ...\n\n"
                             "from geometry import scale_points\n")


def test_an_imported_file_the_project_ignores_is_never_sent(
        tmp_path: Path, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    main = make_project(tmp_path, ignore="geometry.py\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "python"), "LOCAL_COPILOT_LOG_DIR": str(tmp_path)}
    res = subprocess.run([sys.executable, "-m", "local_copilot.cli", "complete", f"{main}:4:23", "--json",
                          "--config", _config(tmp_path, proxy.url, endpoint="infill")],
                         capture_output=True, text=True, env=env, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert [c["source"] for c in json.loads(res.stdout)["context"]] == ["window"]
    for body in proxy.bodies("/infill"):
        assert "scale_points(points" not in json.dumps(body)
        assert body.get("input_extra", []) == []


def test_in_the_editor_the_keys_after_the_first_send_the_signature(
        proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str], tmp_path: Path) -> None:
    """geometry.py is not open: its signature comes from main.py's import, read off the
    keystroke path (the first key asks for it, a later one carries it)."""
    main = make_project(tmp_path)
    nvim = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backends": {"llama.cpp": {"url": proxy.url, "endpoint": "infill"}}, "debounce_ms": 0,
        "adaptive_debounce": False})
    try:
        nvim.command(f"edit {main}")
        nvim.command("call cursor(4, 1)")
        nvim.input("A")
        wait_ghost(nvim, lambda t: t.startswith(PHRASE.split("\n")[0]))  # the host runs now
        def sent() -> bool:
            nvim.input("c")  # one more key: a request of its own
            return any(c["filename"] == "geometry.py" for b in proxy.bodies("/infill") for c in b.get("input_extra", []))
        wait_for(sent, what="the imported signature sent", interval=0.3)
        extra = next(b["input_extra"] for b in proxy.bodies("/infill") if b.get("input_extra"))
        assert extra == [{"filename": "geometry.py",
                          "text": "def scale_points(points, factor, *, origin=(0.0, 0.0)):\n    ...\n"}]
        assert "_unused" not in repr(proxy.requests)  # a private helper is not context
    finally:
        nvim.close()


@pytest.fixture()
def upstream(phrase_server: LlamaServer) -> LlamaServer:
    return phrase_server
