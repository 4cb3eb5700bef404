"""What the privacy policy judges beyond a file's name, in a real Neovim in front of the real
tiny llama-server (a recording proxy between them sees every request):

* a link with an ordinary name to a secret file (`notes.py -> ~/.ssh/config`) is judged as the
  file it resolves to: never sent while typed in, yanked from, jumped in or visited;
* credentials of the kinds the content rule learnt (JWTs, `hf_` tokens, Slack webhooks, URLs with
  a password) keep their buffer's text from the server;
* a binary file opened without ++bin (a copied ELF executable; invalid UTF-8 read as UTF-8) draws
  no request, and status() says why, once, without a notification.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local_copilot.servers.llama_cpp import LlamaServer

from ..fakes.recording_proxy import RecordingProxy
from ..helpers import wait_for
from .nvim_session import lua, start_nvim, wait_ghost

pytestmark = pytest.mark.integration


@pytest.fixture()
def upstream(llama_server: LlamaServer) -> LlamaServer:
    """What `proxy` (conftest.py) stands in front of."""
    return llama_server


@pytest.fixture()
def nvim(proxy: RecordingProxy, nvim_bin: str, manifest: Path, nvim_env: dict[str, str]) -> Iterator[Any]:
    nv = start_nvim(nvim_bin, manifest, nvim_env, setup={
        "backends": {"llama.cpp": {"url": proxy.url}}, "debounce_ms": 0, "adaptive_debounce": False})
    yield nv
    nv.close()


def completions(proxy: RecordingProxy) -> int:
    return len(proxy.bodies("/completion")) + len(proxy.bodies("/infill"))


def status(nvim: Any) -> str:
    return lua(nvim, "require('local_copilot').status()")


def start_typing(nvim: Any, project: Path) -> None:
    """A first suggestion in an ordinary buffer: the host runs and gave Lua its rules."""
    nvim.command("set hidden")
    nvim.command(f"edit {project / 'main.py'}")
    nvim.current.buffer[:] = ["def main():", "    "]
    nvim.command("call cursor(2, 1)")
    nvim.input("A")
    wait_ghost(nvim)
    nvim.input("<Esc>")


def use(nvim: Any, path: Path, expected: str) -> None:
    """Everything that sends a buffer's text: visit it (BufEnter/BufLeave chunks), jump in it,
    yank from it, type at its end, ask for a suggestion on purpose, write it (BufWritePost)."""
    nvim.command(f"edit {path}")
    nvim.input("50G")  # a jump of more than 32 lines is remembered for context
    wait_for(lambda: nvim.current.window.cursor[0] == 50, what="the jump")
    nvim.input("yy")
    wait_for(lambda: nvim.call("getreg", '"').startswith(nvim.current.buffer[49]), what="the yank")
    nvim.input("GA typedtext")
    wait_for(lambda: nvim.current.buffer[-1].endswith("typedtext"), what="the typing")
    nvim.input("<Plug>(local-copilot-trigger)")
    wait_for(lambda: status(nvim) == expected, what=f"status() of {path.name} = {expected!r}")
    nvim.input("<Esc>")
    wait_for(lambda: nvim.api.get_mode()["mode"] == "n")
    nvim.command("write")
    assert status(nvim) == expected  # still, once written (the file is judged anew)
    assert nvim.exec_lua("return vim.fn.execute('LocalCopilot status')").strip().startswith(
        "local-copilot: " + expected)


def ordinary_buffer_sent(nvim: Any, proxy: RecordingProxy, project: Path) -> None:
    """An ordinary buffer visited, then typed in main.py: its text goes as context, so what is
    absent from the requests was kept out, not lost."""
    visible = project / "helpers.py"
    # short lines: a 64-line chunk of them fits the tiny model's cross-file budget (test_security)
    visible.write_text("".join(f"visiblemarker_{i} = {i}\n" if i % 8 == 0 else f"v{i} = {i}\n" for i in range(120)))
    nvim.command(f"edit {visible}")
    nvim.command(f"edit {project / 'main.py'}")
    nvim.command("call cursor(2, 1)")
    n = completions(proxy)
    nvim.input("Avalue = ")
    wait_for(lambda: completions(proxy) > n, what="a request from main.py")
    wait_for(lambda: "visiblemarker_" in json.dumps(proxy.requests), what="the visited buffer sent as context")


def test_a_link_with_an_ordinary_name_to_a_secret_file_is_never_sent(
        nvim: Any, proxy: RecordingProxy, tmp_path: Path) -> None:
    home = tmp_path / "home"
    secrets = {"notes.py": home / ".ssh" / "config", "settings.py": home / ".aws" / "credentials"}
    markers = {"notes.py": "sshmarker7c1", "settings.py": "awsmarker4e2"}
    project = tmp_path / "project"
    project.mkdir()
    for name, target in secrets.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(f"{markers[name]}_{j} = {j}\n" for j in range(80)))
        (project / name).symlink_to(target)
    start_typing(nvim, project)
    for name, target in secrets.items():
        secret_dir = target.parent.name
        use(nvim, project / name,
            f"disabled: resolves to {os.path.realpath(target)}: a secret directory ({secret_dir}/)")
    # an instruction edit of it is refused too (next-edit history: tests/unit/test_privacy.py)
    nvim.command(f"edit {project / 'notes.py'}")
    assert lua(nvim, "require('local_copilot').edit({ line1 = 1, line2 = 2, instruction = 'rename' })") is False
    ordinary_buffer_sent(nvim, proxy, project)
    sent = json.dumps(proxy.requests)
    for name, marker in markers.items():
        assert marker not in sent, f"{name} leaked"
        assert name not in sent, f"{name}'s path leaked"
    assert "typedtext" not in sent


# one line each, built from parts so this file holds no credential a scanner would flag
CREDENTIAL_FILES = {
    "auth.py": ("a JSON Web Token", "TOKEN = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0"
                + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'"),
    "hub.py": ("a Hugging Face token", "HF_TOKEN = 'hf_" + "aBcDeFgHiJ" * 3 + "kLmN'"),
    "alerts.py": ("a Slack webhook URL", "HOOK = 'https://hooks.slack.com/services/" + "T0A1B2C3D/B4E5F6G7H/"
                  + "q1w2E3r4T5y6U7i8O9p0AsDf'"),
    "db.py": ("a URL with a password", "DATABASE_URL = 'postgres://" + "app:hunter2x" + "@db.internal:5432/prod'"),
}


def test_credentials_of_each_new_kind_keep_their_buffer_from_the_server(
        nvim: Any, proxy: RecordingProxy, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    markers = {}
    for i, (name, (_, line)) in enumerate(CREDENTIAL_FILES.items()):
        markers[name] = f"credmarker{i}q"
        (project / name).write_text("\n".join([line] + [f"{markers[name]}_{j} = {j}" for j in range(80)]) + "\n")
    start_typing(nvim, project)
    for name, (kind, _) in CREDENTIAL_FILES.items():
        use(nvim, project / name, f"disabled: the text holds {kind}")
    ordinary_buffer_sent(nvim, proxy, project)
    sent = json.dumps(proxy.requests)
    for name, marker in markers.items():
        assert marker not in sent, f"{name} leaked"
    for secret in ("eyJhbGci", "hf_aBcD", "hooks.slack.com", "hunter2x"):
        assert secret not in sent


def test_a_binary_file_opened_without_bin_draws_no_request(
        nvim: Any, proxy: RecordingProxy, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    tool = project / "tool"
    shutil.copyfile(shutil.which("ls") or "/bin/ls", tool)  # an ELF executable
    start_typing(nvim, project)
    before = json.dumps(proxy.requests)
    nul = "disabled: a binary file (a NUL byte in its first 8000 bytes)"
    nvim.command(f"edit {tool}")
    assert not nvim.current.buffer.options["binary"]
    nvim.input("GA binarytyped")
    wait_for(lambda: nvim.current.buffer[-1].endswith("binarytyped"), what="the typing")
    nvim.input("<Plug>(local-copilot-trigger)")
    wait_for(lambda: status(nvim) == nul, what=f"status() = {nul!r}")
    nvim.input("<Esc>")
    wait_for(lambda: nvim.api.get_mode()["mode"] == "n")
    # text read as UTF-8 that is not (Neovim keeps the bytes when 'fileencodings' has no fallback)
    data = project / "data.txt"
    data.write_bytes(b"".join(b"row %d \xff\xfe\x80 latinmarker\n" % i for i in range(40)))
    nvim.command("set fileencodings=utf-8")
    nvim.command(f"edit {data}")
    nvim.command("setlocal noreadonly")  # a conversion error makes it read-only
    nvim.input("GA invalidtyped")
    wait_for(lambda: nvim.current.buffer[-1].endswith("invalidtyped"), what="the typing")
    nvim.input("<Plug>(local-copilot-trigger)")
    wait_for(lambda: status(nvim) == "disabled: a binary file (not valid utf-8)", what="status() of data.txt")
    nvim.input("<Esc>")
    wait_for(lambda: nvim.api.get_mode()["mode"] == "n")
    ordinary_buffer_sent(nvim, proxy, project)
    sent = json.dumps(proxy.requests)[len(before) - 1:]
    for marker in ("binarytyped", "ELF", "invalidtyped", "latinmarker"):
        assert marker not in sent, marker
    # said in status() only: no notification about it
    assert "binary" not in nvim.exec_lua("return vim.fn.execute('messages')")


def test_nul_bytes_in_a_buffer_without_a_file_are_sent_as_before(nvim: Any, proxy: RecordingProxy,
                                                                tmp_path: Path) -> None:
    # NUL bytes typed on purpose (<C-v>000) into a buffer with no file: not a binary file
    start_typing(nvim, tmp_path)
    nvim.command("enew")
    nvim.command("setlocal filetype=python")
    nvim.input("inulbufmarker = '<C-v>000' + ")
    wait_for(lambda: "nulbufmarker" in json.dumps(proxy.requests), what="a request from the buffer")
    assert status(nvim) != "disabled" and not status(nvim).startswith("disabled:")


def test_a_file_is_judged_anew_when_read_or_written_not_per_key(nvim: Any, proxy: RecordingProxy,
                                                                 tmp_path: Path) -> None:
    """A path is judged once (not on every key), so a change on disk counts from the next read or
    write: a file made a link to a secret file, then read again (:edit!); an ignore file written
    from this Neovim (the host reads it anew: BufWritePost tells it)."""
    project = tmp_path / "project"
    project.mkdir()
    secret = tmp_path / "home" / ".ssh" / "config"
    secret.parent.mkdir(parents=True)
    secret.write_text("Host prod\n")
    notes, data = project / "notes.py", project / "data.txt"
    notes.write_text("x = 1\n")
    data.write_text("y = 2\n")
    start_typing(nvim, project)
    for path, marker in ((notes, "firstmarker1"), (data, "firstmarker2")):
        nvim.command(f"edit {path}")
        nvim.input(f"GA {marker}")
        wait_for(lambda marker=marker: marker in json.dumps(proxy.requests), what=f"{marker} sent")
        nvim.input("<Esc>")
    # notes.py becomes a link to the secret file; Neovim reads it anew
    notes.unlink()
    notes.symlink_to(secret)
    nvim.command(f"edit {notes}")
    nvim.command("edit!")
    nvim.input("GA latermarker1")
    nvim.input("<Plug>(local-copilot-trigger)")
    expected = f"disabled: resolves to {os.path.realpath(secret)}: a secret directory (.ssh/)"
    wait_for(lambda: status(nvim) == expected, what=f"status() = {expected!r}")
    nvim.input("<Esc>")
    # data.txt listed in an ignore file written here
    ignore = project / ".local-copilot-ignore"
    nvim.command(f"edit {ignore}")
    nvim.current.buffer[:] = ["*.txt"]
    nvim.command("write")
    nvim.command(f"edit {data}")
    nvim.input("GA latermarker2")
    nvim.input("<Plug>(local-copilot-trigger)")
    wait_for(lambda: status(nvim) == f"disabled: listed in {ignore}", what="status() of data.txt")
    nvim.input("<Esc>")
    ordinary_buffer_sent(nvim, proxy, project)
    sent = json.dumps(proxy.requests)
    assert "latermarker1" not in sent and "latermarker2" not in sent
