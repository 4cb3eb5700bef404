"""The privacy policy (python/local_copilot/privacy/) and every path that asks it: the
engine's requests (typed window, alternatives, speculative), the ring (chunks, yanks) and
`local-copilot complete`, each against a capturing FAKE server that records what it got."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from local_copilot.cli import main as cli
from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.privacy import binary, lua_rules, rules
from local_copilot.privacy import policy as privacy
from local_copilot.privacy.gate import Gate
from local_copilot.privacy.policy import Policy
from local_copilot.prompt.ring import ContextRing
from local_copilot.snapshot import Snapshot

from ..fakes.editor import RecordingEditor
from ..fakes.fake_server import infill_stream, llama
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
    "a JSON Web Token": "auth = 'Bearer " + "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0"
                        + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'",
    "a Hugging Face token": "HF_TOKEN = 'hf_" + "aBcDeFgHiJ" * 3 + "kLmN" + "'",
    "a Slack webhook URL": "url = 'https://hooks.slack.com/services/" + "T0A1B2C3D/" + "B4E5F6G7H/" + "q1w2E3r4T5y6U7i8O9p0AsDf'",
    "a URL with a password": "DATABASE_URL = 'postgres://" + "app:Kq7vR2zt" + "@db.internal/prod'",
}

# each kind of URL that carries a password, and what is only its placeholder
URL_PASSWORDS = ["postgres://app:" + "hunter2x@db.internal:5432/prod", "mysql://root:" + "s3cr3t@localhost/app",
                 "mongodb+srv://admin:" + "Zx9Qw8Er7@cluster0.example.net/db", "redis://:" + "r3d1spw@cache:6379/0",
                 "amqp://guest:" + "rabbitPW1@mq:5672//", "https://deploy:" + "gHx72kq9@git.example.com/repo.git",
                 "postgresql://postgres:" + "postgres@localhost/test",
                 # the issue's own example: short, but a password (a real one may be as short)
                 "postgres://user:" + "pass@host/db"]
URL_PLACEHOLDERS = ["postgres://user:" + "password@localhost:5432/mydb", "mysql://root:<password>@localhost/app",
                    "postgres://u:${DB_PASSWORD}@db/app", "redis://:$REDIS_PASS@cache:6379", "amqp://u:{password}@mq",
                    "https://user:****@example.com", "mongodb://me:xxxxxxxx@host/db", "postgres://%s:%s@%s/%s",
                    "postgres://app:your_password@db/app", "https://x-access-token:{{ token }}@github.com/o/r",
                    "http://localhost:8080/path?q=a:b@c", "http://[::1]:8012/infill", "git@github.com:o/r.git"]


@pytest.mark.parametrize(("reason", "line"), list(CREDENTIALS.items()))
def test_a_credential_in_the_text_refuses_it(reason: str, line: str) -> None:
    assert Policy().refusal("/p/notes.py", ["x = 1", line, "y = 2"]) == f"the text holds {reason}"


def test_code_that_talks_about_keys_passes() -> None:
    lines = ["api_key = os.environ['OPENAI_API_KEY']", "sk = 'sk-testkey-0f3e9a7b51'", "# BEGIN PUBLIC KEY",
             "-----BEGIN CERTIFICATE-----", "AKIA = 'prefix'", "token = get_token()",
             "from huggingface_hub import hf_hub_download_with_a_long_name", "jwt = 'eyJ' + header + '.eyJ'",
             "SLACK = 'https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX'"]
    assert Policy().refusal("/p/a.py", lines) is None


@pytest.mark.parametrize("url", URL_PASSWORDS)
def test_a_url_with_a_password_refuses_the_text_whatever_its_scheme(url: str) -> None:
    assert Policy().text_reason([f"url = {url!r}"]) == "a URL with a password"


@pytest.mark.parametrize("url", URL_PLACEHOLDERS)
def test_a_url_whose_password_is_a_placeholder_or_absent_passes(url: str) -> None:
    # README and template examples: refusing them would turn completion off in every such file
    assert Policy().text_reason([f"url = {url!r}"]) is None


def test_each_line_is_judged_once_so_a_keystroke_scans_the_line_it_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    judged: list[str] = []
    real = privacy.line_reason
    monkeypatch.setattr(privacy, "line_reason", lambda line: judged.append(line) or real(line))
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
    (tmp_path / rules.IGNORE_FILE).write_text("# comment\n*.csv\n/top.py\nbuild/\n!keep.csv\nsub/deep/*.py\n")
    policy = Policy()
    reason = policy.path_reason(str(tmp_path / "sub" / "Data.CSV"))
    assert reason == f"listed in {tmp_path / rules.IGNORE_FILE}"
    assert policy.path_reason(str(tmp_path / "sub" / "keep.csv")) is None  # negation
    assert policy.path_reason(str(tmp_path / "top.py"))
    assert policy.path_reason(str(tmp_path / "sub" / "top.py")) is None  # anchored to the file's directory
    assert policy.path_reason(str(tmp_path / "build" / "out.py"))
    assert policy.path_reason(str(tmp_path / "sub" / "deep" / "x.py"))
    assert policy.path_reason(str(tmp_path / "sub" / "x.py")) is None
    assert Policy(ignore_file="").path_reason(str(tmp_path / "sub" / "Data.CSV")) is None


@pytest.mark.parametrize("name", rules.AI_IGNORE_FILES)
def test_other_ai_tools_ignore_files_are_obeyed(tmp_path: Path, name: str) -> None:
    # JetBrains' .aiignore, Gemini's .aiexclude, Cursor's .cursorignore: a project that says
    # "never send these" to another tool says it to this one, whatever ignore_file is
    (tmp_path / "src" / "secret").mkdir(parents=True)
    (tmp_path / name).write_text("secret/\n*.internal.py\n")
    for policy in (Policy(), Policy(ignore_file="")):
        assert policy.path_reason(str(tmp_path / "src" / "secret" / "keys.py")) == f"listed in {tmp_path / name}"
        assert policy.path_reason(str(tmp_path / "src" / "a.internal.py")) == f"listed in {tmp_path / name}"
        assert policy.path_reason(str(tmp_path / "src" / "a.py")) is None


def test_an_ai_ignore_file_written_is_read_anew(tmp_path: Path) -> None:
    policy = Policy()
    path = str(tmp_path / "data.py")
    assert policy.path_reason(path) is None
    (tmp_path / ".aiignore").write_text("data.py\n")
    policy.forget_path(str(tmp_path / ".aiignore"))
    assert policy.path_reason(path) == f"listed in {tmp_path / '.aiignore'}"


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


# -- links: the policy judges the file a path resolves to, and its name -----------------------

def secret_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host prod\n  IdentityFile ~/.ssh/prod\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("[default]\n")
    return home


def test_a_link_with_an_ordinary_name_to_a_secret_file_is_refused(tmp_path: Path) -> None:
    home = secret_home(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.py").symlink_to(home / ".ssh" / "config")
    (project / "settings.py").symlink_to(home / ".aws" / "credentials")
    (project / "conf").symlink_to(home / ".ssh", target_is_directory=True)  # a linked directory
    (project / "later.py").symlink_to(home / ".ssh" / "not_yet")  # dangling: :write creates the secret file
    policy = Policy()
    assert policy.path_reason(str(project / "notes.py")) == \
        f"resolves to {home / '.ssh' / 'config'}: a secret directory (.ssh/)"
    assert policy.path_reason(str(project / "settings.py")) == \
        f"resolves to {home / '.aws' / 'credentials'}: a secret directory (.aws/)"
    assert policy.path_reason(str(project / "conf" / "config"))
    assert policy.path_reason(str(project / "conf" / "new_file.py"))  # a new file in it
    assert policy.path_reason(str(project / "later.py"))
    # and every path that asks the policy: the typed window's refusal, the ring's chunks
    assert policy.refusal(str(project / "notes.py"), ["Host prod"])
    ring = ContextRing()
    ring.use_policy(policy)
    assert not ring.add(str(project / "notes.py"), code("a"))
    assert ring.add(str(project / "main.py"), code("b"))


async def test_next_edit_history_and_instruction_edits_refuse_a_link_to_a_secret_file(tmp_path: Path) -> None:
    from local_copilot.instruct.prompt import EditSpec

    home = secret_home(tmp_path)
    link = tmp_path / "notes.py"
    link.symlink_to(home / ".ssh" / "config")
    engine = Core(RecordingEditor())
    engine.configure(load_config({}))
    engine.next_edits.record(str(link), 0, ["Host a"], ["Host b"])
    engine.next_edits.record(str(tmp_path / "main.py"), 0, ["x = 1"], ["x = 2"])
    assert [e.path for e in engine.next_edits.history.events()] == [str(tmp_path / "main.py")]
    spec = EditSpec(path=str(link), ft="", lines=["Host a"], before=[], after=[], instruction="rename")
    assert engine.edits._refused(spec) == f"resolves to {home / '.ssh' / 'config'}: a secret directory (.ssh/)"
    await engine.close()


def test_a_link_with_a_secret_name_to_an_ordinary_file_is_refused_by_its_name(tmp_path: Path) -> None:
    (tmp_path / "values.txt").write_text("A=1\n")
    (tmp_path / ".env").symlink_to(tmp_path / "values.txt")
    assert Policy().path_reason(str(tmp_path / ".env")) == "a secret file (.env)"
    assert Policy().path_reason(str(tmp_path / "values.txt")) is None


def test_a_link_made_after_the_path_was_judged_counts_once_the_editor_says_the_file_changed(tmp_path: Path) -> None:
    home = secret_home(tmp_path)
    path = tmp_path / "notes.py"
    path.write_text("x = 1\n")
    ring = ContextRing()
    gate = Gate(RecordingEditor(), ring)
    assert gate.policy.path_reason(str(path)) is None
    assert ring.add(str(path), code("a"))
    path.unlink()
    path.symlink_to(home / ".ssh" / "config")
    assert gate.policy.path_reason(str(path)) is None  # judged once per path, not per keystroke
    gate.forget_path(str(path))  # BufWritePost / BufReadPost / BufFilePost
    assert gate.policy.path_reason(str(path))
    assert not ring.chunks  # its chunk taken before left the ring


def test_an_ignore_file_written_is_read_anew(tmp_path: Path) -> None:
    policy = Policy()
    path = str(tmp_path / "data.csv")
    assert policy.path_reason(path) is None
    (tmp_path / rules.IGNORE_FILE).write_text("*.csv\n")
    policy.forget_path(str(tmp_path / rules.IGNORE_FILE))
    assert policy.path_reason(path) == f"listed in {tmp_path / rules.IGNORE_FILE}"


# -- binary files: git's rule -------------------------------------------------------------------

def test_binary_files_by_gits_rule() -> None:
    nul = "a binary file (a NUL byte in its first 8000 bytes)"
    assert binary.binary_reason(b"\x7fELF\x02\x01\x01\x00\x00") == nul
    assert binary.binary_reason(b"x" * 7999 + b"\x00") == nul
    assert binary.binary_reason(b"x" * 8000 + b"\x00", more=True) is None  # past the first 8000 bytes
    assert binary.binary_reason(b"caf\xc3\xa9 = 1\n") is None
    assert binary.binary_reason(b"abc\xff\xfedef\n") == "a binary file (not valid utf-8)"
    assert binary.binary_reason(b"abc\xff\xfedef\n", "latin1") is None  # valid in the file's encoding
    assert binary.binary_reason(b"x" * 7999 + b"\xc3", more=True) is None  # a character cut by the 8000
    assert binary.binary_reason(b"x" * 7999 + b"\xc3") == "a binary file (not valid utf-8)"
    assert binary.binary_reason("héllo".encode("utf-16-le"), "utf-16le") is None  # its NULs are text
    assert binary.binary_reason(b"\x00\x00", "no-such-encoding") == nul
    assert binary.binary_reason(b"abc", "no-such-encoding") is None


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

def window(path: str, lines: list[str], seq: int, buf: int = 1) -> Snapshot:
    return Snapshot(buf=buf, tick=seq, row=len(lines) - 1, col=len(lines[-1]), first=0, lines=lines,
                    nlines=len(lines), path=path, seq=seq)


async def test_refused_text_draws_no_request_and_the_editor_hears_why(fake: Any) -> None:
    server = fake(llama(infill_stream(["ok"])))
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}, "exclude": ["*.sql"]}))
    key = CREDENTIALS["a private-key block"]
    for snap in [window("/p/.ENV", ["TOKEN=envmarker"], 1, buf=1),
                 window("/p/q.sql", ["select sqlmarker"], 2, buf=2),
                 window("/p/notes.py", [key, "keymarker = 1"], 3, buf=3)]:
        engine.ghost.submit(snap)
        engine.ghost.alternatives(snap)
    engine.ghost.submit(window("/p/main.py", ["x = 1"], 4, buf=4))
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
    engine.ghost.submit(window("/p/notes.py", ["keymarker = 1"], 5, buf=3))
    await wait_until(lambda: "keymarker" in json.dumps(server.requests))
    assert editor.verdicts[-1] == (3, "/p/notes.py", None, "content")
    await engine.close()


async def test_a_speculative_request_is_not_sent_when_the_suggestion_holds_a_credential(fake: Any) -> None:
    leaked = CREDENTIALS["a GitHub token"]
    server = fake(llama(infill_stream([leaked])))
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(load_config({"backends": {"llama.cpp": {"url": server.url}}, "speculative": True,
                                  "n_predict_first": 0}))
    engine.ghost.submit(window("/p/main.py", ["x = "], 1))
    # a speculation starts in the step that shows the final plan (Engine._finished), so it
    # exists by now, had one been made
    await wait_until(lambda: any(p.final for p in editor.plans))
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


def test_local_copilot_complete_judges_a_link_by_its_name_and_its_target(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fake: Any) -> None:
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    server = fake(llama(infill_stream(["ok"])))
    home = secret_home(tmp_path)
    (home / ".ssh" / "config").write_text("Host sshmarker\n")
    notes = tmp_path / "notes.py"
    notes.symlink_to(home / ".ssh" / "config")
    assert cli.main(["complete", str(notes), "--url", server.url]) == 1
    assert capsys.readouterr().err == (f"local-copilot: not sent: {notes} is private: resolves to "
                                       f"{home / '.ssh' / 'config'}: a secret directory (.ssh/)\n")
    (tmp_path / "plain.txt").write_text("TOKEN=envmarker\n")
    env = tmp_path / ".env"
    env.symlink_to(tmp_path / "plain.txt")
    assert cli.main(["complete", str(env), "--url", server.url]) == 1
    assert "is private: a secret file (.env)" in capsys.readouterr().err
    assert not [r for r in server.requests if r[0] in ("/infill", "/completion")]


def test_local_copilot_complete_sends_no_byte_of_a_binary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fake: Any) -> None:
    monkeypatch.setenv("LOCAL_COPILOT_LOG_DIR", str(tmp_path / "log"))
    server = fake(llama(infill_stream(["ok"])))
    tool = tmp_path / "tool"
    shutil.copyfile(shutil.which("ls") or "/bin/ls", tool)  # an ELF executable
    assert cli.main(["complete", str(tool), "--url", server.url]) == 1
    err = capsys.readouterr().err
    assert err == f"local-copilot: not sent: {tool} is a binary file (a NUL byte in its first 8000 bytes)\n", err
    assert not [r for r in server.requests if r[0] in ("/infill", "/completion")]


def test_the_lua_copy_of_the_built_in_rules_is_generated_from_these() -> None:
    # Lua judges paths with it before the host has started; `python -m local_copilot.privacy.lua_rules` writes it
    root = Path(__file__).resolve().parents[2]
    assert (root / lua_rules.LUA_RULES_FILE).read_text() == lua_rules.lua_source()
