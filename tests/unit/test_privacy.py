"""The privacy policy (python/local_copilot/privacy.py) and every path that asks it: the
engine's requests (typed window, alternatives, speculative), the ring (chunks, yanks) and
`local-copilot complete`, each against a capturing FAKE server that records what it got."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from local_copilot import privacy
from local_copilot.cli import main as cli
from local_copilot.config import load_config
from local_copilot.engine import Engine
from local_copilot.privacy import Policy
from local_copilot.prompt.ring import ContextRing
from local_copilot.snapshot import Snapshot

from ..fakes.fake_server import infill_stream, llama
from ..fakes.editor import RecordingEditor
from .test_engine import wait_until

# the files of issue 24 that drew requests, and their kin, in the case a user may write them
SECRET_PATHS = [
    "/p/.ENV", "/p/.env", "/p/.Env.Local", "/p/prod.env", "/p/secrets.yaml", "/p/SECRETS.JSON", "/h/.ssh/config",
    "/h/.ssh/deploy_key", "/h/.SSH/known_hosts", "/h/.git-credentials", "/h/.npmrc", "/h/.pypirc",
    "/h/.kube/config", "/p/server.p12", "/h/.pgpass", "/h/.netrc", "/h/.gnupg/pubring.kbx", "/h/.aws/config",
    "/h/.azure/accessTokens.json", "/h/.docker/config.json", "/h/.config/gcloud/credentials.db",
    "/h/.config/gcloud/legacy_credentials/me/adc.json", "/p/id_rsa", "/p/ID_RSA.pub", "/p/id_ed25519",
    "/p/deploy_key", "/p/github-deploy-key", "/p/tls.KEY", "/p/ca.pem", "/p/ca.crt", "/p/store.jks",
    "/p/app.keystore", "/p/client.pfx", "/p/putty.ppk", "/p/.envrc", "/p/credentials.json", "/h/.my.cnf",
    r"C:\Users\me\.SSH\config", r"C:\Users\me\.ENV", "/p/terraform.tfvars",
]
ORDINARY_PATHS = ["", "main.py", "/p/environment.py", "/p/envs/x.py", "/p/keyboard.c", "/p/monkey.py",
                  "/p/src/tokens.rs", "/p/secretary.py", "/p/docs/ssh.md", "/p/env.py", "/p/keys.py",
                  "/p/.config/nvim/init.lua", "/p/docker/config.json"]


@pytest.mark.parametrize("path", SECRET_PATHS)
def test_secret_paths_are_refused_whatever_their_case(path: str) -> None:
    assert Policy().path_reason(path)


@pytest.mark.parametrize("path", ORDINARY_PATHS)
def test_ordinary_paths_pass(path: str) -> None:
    assert Policy().path_reason(path) is None


# built from parts so this file holds no credential a scanner would flag
CREDENTIALS = {
    "a private-key block": "-----BEGIN " + "OPENSSH PRIVATE KEY-----",
    "an AWS access key": 'aws_key = "AKIA' + "IOSFODNN7EXAMPLE" + '"',
    "a GitHub token": "token = 'ghp_" + "a1B2" * 9 + "'",
    "a GitLab token": "glpat-" + "x" * 20,
    "a Slack token": "xoxb-" + "1234567890-" + "abcdefghijkl",
    "an OpenAI key": "sk-proj-" + "abcdefgh12" + "T3BlbkFJ" + "ijklmnop34",
}


@pytest.mark.parametrize(("reason", "line"), list(CREDENTIALS.items()))
def test_a_credential_in_the_text_refuses_it(reason: str, line: str) -> None:
    assert Policy().refusal("/p/notes.py", ["x = 1", line, "y = 2"]) == f"the text holds {reason}"


def test_code_that_talks_about_keys_passes() -> None:
    lines = ["api_key = os.environ['OPENAI_API_KEY']", "sk = 'sk-testkey-0f3e9a7b51'", "# BEGIN PUBLIC KEY",
             "-----BEGIN CERTIFICATE-----", "AKIA = 'prefix'", "token = get_token()"]
    assert Policy().refusal("/p/a.py", lines) is None


def test_each_line_is_judged_once_so_a_keystroke_scans_the_line_it_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    judged: list[str] = []
    real = privacy._line_reason
    monkeypatch.setattr(privacy, "_line_reason", lambda line: judged.append(line) or real(line))
    policy = Policy()
    window = [f"line_{i} = {i} * some_value_here" for i in range(260)]
    assert policy.text_reason(window) is None
    assert len(judged) == 260
    judged.clear()
    window[100] += " + 1"  # one keystroke on one line
    assert policy.text_reason(window) is None
    assert judged == [window[100]]


def test_user_exclude_globs(tmp_path: Path) -> None:
    home = str(Path("~").expanduser())
    policy = Policy(["*.sql", "private/**", "/srv/app/config.py", "~/notes/*"])
    assert "'*.sql'" in (policy.path_reason("/p/db/Schema.SQL") or "")
    assert "'private/**'" in (policy.path_reason("/p/private/a/b.py") or "")
    assert policy.path_reason("/srv/app/config.py")
    assert policy.path_reason("/other/srv/app/config.py") is None  # a leading / anchors
    assert policy.path_reason(f"{home}/notes/todo.md")
    assert policy.path_reason("/p/notes/todo.md") is None
    assert policy.path_reason("/p/public/a.py") is None


def test_the_project_ignore_file_in_gitignore_syntax(tmp_path: Path) -> None:
    (tmp_path / "sub" / "deep").mkdir(parents=True)
    (tmp_path / privacy.IGNORE_FILE).write_text("# comment\n*.csv\n/top.py\nbuild/\n!keep.csv\nsub/deep/*.py\n")
    policy = Policy()
    reason = policy.path_reason(str(tmp_path / "sub" / "Data.CSV"))
    assert reason == f"listed in {tmp_path / privacy.IGNORE_FILE}"
    assert policy.path_reason(str(tmp_path / "sub" / "keep.csv")) is None  # negation
    assert policy.path_reason(str(tmp_path / "top.py"))
    assert policy.path_reason(str(tmp_path / "sub" / "top.py")) is None  # anchored to the file's directory
    assert policy.path_reason(str(tmp_path / "build" / "out.py"))
    assert policy.path_reason(str(tmp_path / "sub" / "deep" / "x.py"))
    assert policy.path_reason(str(tmp_path / "sub" / "x.py")) is None
    assert Policy(ignore_file="").path_reason(str(tmp_path / "sub" / "Data.CSV")) is None


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_files_git_ignores_when_asked(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("generated/\n")
    path = str(tmp_path / "generated" / "a.py")
    assert Policy().path_reason(path) is None
    assert Policy(git_ignored=True).path_reason(path) == "ignored by git (privacy.git_ignored)"
    assert Policy(git_ignored=True).path_reason(str(tmp_path / "a.py")) is None


def test_options_reach_the_policy() -> None:
    cfg = load_config({"exclude": ["*.sql"], "privacy": {"ignore_file": ".nope", "git_ignored": True}})
    policy = Policy.from_config(cfg)
    assert policy.exclude == ("*.sql",) and policy.ignore_file == ".nope" and policy.git_ignored


# -- the ring -------------------------------------------------------------------------------

def code(tag: str) -> list[str]:
    return [f"def {tag}_{i}(value):  # some code" for i in range(12)]


def test_chunks_and_yanks_holding_a_credential_never_enter_the_ring() -> None:
    ring = ContextRing()
    leaky = code("a")
    leaky[5] = CREDENTIALS["an AWS access key"]
    assert not ring.add("/p/notes.py", leaky)
    assert not ring.chunk_from_yank("/p/notes.py", "\n".join(leaky))
    assert ring.add("/p/ok.py", code("b"))  # the ring works
    assert [c.filename for c in ring.chunks] == ["/p/ok.py"]


def test_new_options_take_refused_chunks_out_of_the_ring() -> None:
    ring = ContextRing()
    assert ring.add("/p/a.sql", code("a")) and ring.add("/p/b.py", code("b"))
    ring.use_policy(Policy(["*.sql"]))
    assert [c.filename for c in ring.chunks] == ["/p/b.py"]


# -- the engine: what reaches the server ----------------------------------------------------

class PrivacyEditor(RecordingEditor):
    def __init__(self) -> None:
        super().__init__()
        self.verdicts: list[tuple[int, str, str | None, str]] = []

    def private(self, buf: int, path: str, reason: str | None, kind: str) -> None:
        self.verdicts.append((buf, path, reason, kind))


def window(path: str, lines: list[str], seq: int, buf: int = 1) -> Snapshot:
    return Snapshot(buf=buf, tick=seq, row=len(lines) - 1, col=len(lines[-1]), first=0, lines=lines,
                    nlines=len(lines), path=path, seq=seq)


async def test_refused_text_draws_no_request_and_the_editor_hears_why(fake: Any) -> None:
    server = fake(llama(infill_stream(["ok"])))
    editor = PrivacyEditor()
    engine = Engine(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}, "exclude": ["*.sql"]}))
    key = CREDENTIALS["a private-key block"]
    for snap in [window("/p/.ENV", ["TOKEN=envmarker"], 1, buf=1),
                 window("/p/q.sql", ["select sqlmarker"], 2, buf=2),
                 window("/p/notes.py", [key, "keymarker = 1"], 3, buf=3)]:
        engine.submit(snap)
        engine.alternatives(snap)
    engine.submit(window("/p/main.py", ["x = 1"], 4, buf=4))
    await wait_until(lambda: any(p.final for p in editor.plans))
    sent = json.dumps(server.requests)
    assert "x = 1" in sent  # the capture works
    for marker in ("envmarker", "sqlmarker", "keymarker", "PRIVATE KEY"):
        assert marker not in sent
    assert editor.verdicts == [
        (1, "/p/.ENV", "a secret file (.env)", "path"),
        (2, "/p/q.sql", "excluded by your `exclude` glob '*.sql'", "path"),
        (3, "/p/notes.py", "the text holds a private-key block", "content"),
    ]
    # the key removed: sent again, and the editor hears the buffer is fine now
    engine.submit(window("/p/notes.py", ["keymarker = 1"], 5, buf=3))
    await wait_until(lambda: "keymarker" in json.dumps(server.requests))
    assert editor.verdicts[-1] == (3, "/p/notes.py", None, "content")
    await engine.close()


async def test_a_speculative_request_is_not_sent_when_the_suggestion_holds_a_credential(fake: Any) -> None:
    leaked = CREDENTIALS["a GitHub token"]
    server = fake(llama(infill_stream([leaked])))
    editor = PrivacyEditor()
    engine = Engine(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}, "speculative": True,
                                  "n_predict_first": 0}))
    engine.submit(window("/p/main.py", ["x = "], 1))
    await wait_until(lambda: any(p.final for p in editor.plans))
    await asyncio.sleep(0)  # the speculative task, had it been made, is made by now
    await wait_until(lambda: all(s.speculative is None or s.speculative.done() for s in engine.buffers.values()))
    assert len([r for r in server.requests if r[0] in ("/infill", "/completion")]) == 1
    assert "ghp_" not in json.dumps([b for p, b in server.requests])
    await engine.close()


# -- the CLI ----------------------------------------------------------------------------------

def test_local_copilot_complete_refuses_a_secret_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str], fake: Any) -> None:
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    server = fake(llama(infill_stream(["ok"])))
    secret = tmp_path / ".npmrc"
    secret.write_text("//registry.npmjs.org/:_authToken=npmmarker\n")
    assert cli.main(["complete", str(secret), "--url", server.url]) == 1
    err = capsys.readouterr().err
    assert err == f"local-copilot: not sent: {secret} is private: a secret file (.npmrc)\n", err
    leaky = tmp_path / "notes.py"
    leaky.write_text(CREDENTIALS["an AWS access key"] + "\nx = 1\n")
    assert cli.main(["complete", str(leaky), "--url", server.url]) == 1
    assert "is private: the text holds an AWS access key" in capsys.readouterr().err
    assert not [r for r in server.requests if r[0] in ("/infill", "/completion")]


def test_the_lua_copy_of_the_built_in_rules_is_generated_from_these() -> None:
    # Lua judges paths with it before the host has started; `python -m local_copilot.privacy` writes it
    root = Path(__file__).resolve().parents[2]
    assert (root / privacy.LUA_RULES_FILE).read_text() == privacy.lua_source()
