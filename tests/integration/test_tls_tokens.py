"""A team server over TLS with its own CA, and tokens: real llama-servers started with
`--ssl-cert-file/--ssl-key-file` (a certificate from a private CA made by tests/pki.py) and
`--api-key`, reached by every path that talks to a server — ghost text in a real Neovim,
next edits, instruction edits, the health report (`doctor`), the CLI's one-shot completion,
the bench and the server supervisor — with the entry's `ca_file` and `api_key_env`.

The failures a user meets are one message each that names the problem: a certificate whose
issuer is not trusted, one for another name, an expired one, a token refused or missing. The
token never appears in the log (even at debug level), in :messages, in :checkhealth or in
`:LocalCopilot status`.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_copilot.backend_bench.runner import Params, Target, bench_backend
from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.errors import CertificateRejected, TokenRefused
from local_copilot.health.report import collect, render_text
from local_copilot.instruct.chat import chat_backend
from local_copilot.servers.backend_manager import _healthy
from local_copilot.servers.llama_cpp import LlamaServer
from local_copilot.servers.supervisor import Supervisor
from local_copilot.transport.access import async_client, tls_failure
from local_copilot.transport.http_stream import StreamClient

from ..fakes.editor import RecordingEditor
from ..helpers import first_failure, wait_for
from ..launch import suite_options
from ..pki import Pki
from ..unit.test_engine import snap, wait_until
from .nvim_session import health_report, log_text, lua, wait_ghost

pytestmark = pytest.mark.integration

TOKEN = "sk-team-7c41d09e5b"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def team(pki: Pki, models: dict[str, Path], llama_bin: str, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[LlamaServer]:
    """The team server: https with a certificate for 127.0.0.1 from the team's CA, and a key."""
    cert, key = pki.server("team-server")
    log = tmp_path_factory.mktemp("team") / "server.log"
    # two slots, the users' recipe's default: a team's server takes several requests at once
    options = suite_options("--ssl-cert-file", str(cert), "--ssl-key-file", str(key), "--api-key", TOKEN, parallel=2)
    with LlamaServer.for_model(models["x"], binary=llama_bin, log_file=log, tls=pki.context(), options=options) as server:
        yield server


@pytest.fixture(scope="module")
def expired(pki: Pki, models: dict[str, Path], llama_bin: str, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[LlamaServer]:
    cert, key = pki.server("old-server", days=-1)
    unchecked = ssl.create_default_context()
    unchecked.check_hostname = False
    unchecked.verify_mode = ssl.CERT_NONE
    log = tmp_path_factory.mktemp("expired") / "server.log"
    with LlamaServer.for_model(models["x"], binary=llama_bin, log_file=log, tls=unchecked,
                               options=suite_options("--ssl-cert-file", str(cert), "--ssl-key-file", str(key))) as server:
        yield server


@pytest.fixture()
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TEAM_TOKEN", TOKEN)
    return TOKEN


def options(url: str, **entry: Any) -> dict[str, Any]:
    return {"backend": "team", "backends": {"team": {"kind": "llama.cpp", "url": url, **entry}}}


def typing(open_nvim: Callable[..., Any], tmp_path: Path, setup: dict[str, Any], env: dict[str, str]) -> Any:
    """A Neovim with the plugin set up by `setup`, "a = " just typed in a new Python file."""
    nvim = open_nvim(setup, env)
    nvim.command(f"edit {tmp_path / 'a.py'}")
    nvim.input("ia = ")
    return nvim


def said(nvim: Any) -> str:
    """:messages, and what `:LocalCopilot status` prints."""
    return nvim.exec_lua("return vim.fn.execute('messages') .. vim.fn.execute('LocalCopilot status')")


# -- every path, with the CA and the token ---------------------------------------------------


def test_ghost_text_from_a_team_server_over_tls_with_its_own_ca_and_a_token(
        team: LlamaServer, pki: Pki, open_nvim: Callable[..., Any], nvim_env: dict[str, str], tmp_path: Path) -> None:
    env = dict(nvim_env, TEAM_TOKEN=TOKEN)
    nvim = typing(open_nvim, tmp_path, {
        **options(team.url, ca_file=str(pki.ca), api_key_env="TEAM_TOKEN"), "log_level": "debug",
        "debounce_ms": 0}, env)
    assert wait_ghost(nvim).startswith("x")
    health = health_report(nvim)
    assert "certificate trusted through backends['team'].ca_file: subject CN=team-server for 127.0.0.1, " \
           "issuer O=Team, CN=Team Test CA, expires 20" in health, health
    assert "TEAM_TOKEN is set" in health
    assert TOKEN not in health
    assert TOKEN not in said(nvim)
    assert TOKEN not in log_text(env)


async def test_next_edits_instruction_edits_probes_the_bench_and_the_supervisor_use_the_ca_and_token(
        team: LlamaServer, pki: Pki, token: str, tmp_path: Path) -> None:
    cfg = load_config({**options(team.url, ca_file=str(pki.ca), api_key_env="TEAM_TOKEN"),
                       "next_edit": {"enabled": True, "format": "zeta", "n_predict": 8}})
    entry = cfg.backends["team"]
    engine = Core(RecordingEditor())
    engine.configure(cfg)
    try:
        # next edits: the raw completion endpoint, over TLS with the token
        outcome = await engine.next_edits.ask(snap(1))
        assert outcome.answer.startswith("x"), outcome
        # instruction edits: the chat endpoint
        async with async_client([entry], timeout=10.0) as client:
            chat = chat_backend("team", entry, client)
            exchange = await chat.chat([{"role": "user", "content": "write x"}], 4, 0.0)
            text = "".join([c.text async for c in exchange.chunks()])
            chat.close()
        assert text.startswith("x"), text
        # the switcher's readiness check and the supervisor's (a server on this machine it did not start)
        assert await _healthy(entry.url, entry.kind, entry)
        sup = Supervisor("team", entry, env={**os.environ, "LOCAL_COPILOT_RUNTIME_DIR": str(tmp_path)})
        assert (await asyncio.to_thread(sup.status)).state == "external"
        # the bench
        result = await bench_backend(Target("team", entry), Params(n_predict=4, requests=1, concurrency=[1],
                                                                    warmup=1, context_lines=4))
        assert not result.error and result.latency is not None and result.latency.ok == 1, result
    finally:
        await engine.close()


async def test_doctor_shows_the_certificate_and_never_the_token(team: LlamaServer, pki: Pki, token: str) -> None:
    report = render_text(await collect(options(team.url, ca_file=str(pki.ca), api_key_env="TEAM_TOKEN"),
                                       editor=False))
    assert "OK     certificate trusted through backends['team'].ca_file: subject CN=team-server" in report, report
    assert "FIM probe" in report and "FIM probe failed" not in report, report
    assert TOKEN not in report


def test_the_cli_completes_from_the_team_server(team: LlamaServer, pki: Pki, tmp_path: Path) -> None:
    conf = tmp_path / "options.json"
    conf.write_text(json.dumps(options(team.url, ca_file=str(pki.ca), api_key_env="TEAM_TOKEN")))
    source = tmp_path / "a.py"
    source.write_text("a = \n")
    env = {**os.environ, "TEAM_TOKEN": TOKEN, "PYTHONPATH": str(REPO / "python"),
           "LOCAL_COPILOT_LOG_DIR": str(tmp_path / "log")}
    done = subprocess.run([sys.executable, "-m", "local_copilot.cli", "complete", "--config", str(conf),
                           f"{source}:1:5"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("x"), done.stdout
    assert TOKEN not in done.stdout + done.stderr


# -- what goes wrong, said as what it is ------------------------------------------------------


def test_an_untrusted_certificate_is_one_message_that_says_so(
        team: LlamaServer, open_nvim: Callable[..., Any], nvim_env: dict[str, str], tmp_path: Path) -> None:
    env = dict(nvim_env, TEAM_TOKEN=TOKEN)
    nvim = typing(open_nvim, tmp_path, {**options(team.url, api_key_env="TEAM_TOKEN"), "debounce_ms": 0}, env)
    wait_for(lambda: lua(nvim, "require('local_copilot').status()") == "backend down", what="backend down")
    shown = wait_for(lambda: [ln for ln in said(nvim).splitlines() if ln.startswith("local-copilot: team")],
                     what="the message")
    assert shown[0].startswith(f"local-copilot: team: the certificate of {team.url} is not trusted "
                               "(unable to get local issuer certificate); set backends.team.ca_file"), shown
    assert "cannot reach" not in said(nvim)
    health = health_report(nvim)
    assert "certificate is not trusted (unable to get local issuer certificate): subject CN=team-server " \
           "for 127.0.0.1, issuer O=Team, CN=Team Test CA, expires" in health, health
    assert "set backends['team'].ca_file to the PEM of the CA that issued it (O=Team, CN=Team Test CA)" in health
    assert TOKEN not in health + said(nvim) + log_text(env)


async def test_a_certificate_for_another_name_and_an_expired_one_say_so(
        team: LlamaServer, expired: LlamaServer, pki: Pki, token: str) -> None:
    # the certificate names 127.0.0.1 only
    other_name = team.url.replace("127.0.0.1", "localhost")
    exc = await first_failure(options(other_name, ca_file=str(pki.ca), api_key_env="TEAM_TOKEN"))
    assert isinstance(exc, CertificateRejected)
    assert str(exc) == (f"team: the certificate of {other_name} is for another name (Hostname mismatch, certificate "
                        "is not valid for 'localhost'.); use the host name the certificate names in backends.team.url")
    exc = await first_failure(options(expired.url, ca_file=str(pki.ca)))
    assert isinstance(exc, CertificateRejected)
    assert str(exc) == (f"team: the certificate of {expired.url} has expired; renew the server's certificate")
    report = render_text(await collect(options(expired.url, ca_file=str(pki.ca)), editor=False))
    assert "ERROR  certificate has expired: subject CN=old-server for 127.0.0.1, issuer O=Team, CN=Team Test CA" \
           in report, report


async def test_tls_verify_false_completes_and_doctor_warns_every_time(team: LlamaServer, token: str) -> None:
    raw = options(team.url, tls_verify=False, api_key_env="TEAM_TOKEN")
    cfg = load_config(raw)
    editor = RecordingEditor()
    engine = Core(editor)
    engine.configure(cfg)
    try:
        engine.ghost.submit(snap(1))
        await wait_until(lambda: any(p.final for p in editor.plans), timeout=20)
        assert editor.final[0].startswith("x")
    finally:
        await engine.close()
    for _ in range(2):
        report = render_text(await collect(raw, editor=False))
        assert ("WARN   backends['team'].tls_verify = false: the certificate of " + team.url + " is not checked") \
            in report, report


def test_a_refused_token_names_its_variable_and_is_never_shown(
        team: LlamaServer, pki: Pki, open_nvim: Callable[..., Any], nvim_env: dict[str, str], tmp_path: Path) -> None:
    wrong = "sk-wrong-31b7aa0c92"
    env = dict(nvim_env, TEAM_TOKEN=wrong)
    nvim = typing(open_nvim, tmp_path, {
        **options(team.url, ca_file=str(pki.ca), api_key_env="TEAM_TOKEN"), "debounce_ms": 0, "log_level": "debug"}, env)
    shown = wait_for(lambda: [ln for ln in said(nvim).splitlines() if ln.startswith("local-copilot: team")],
                     what="the message")
    assert shown[0].startswith("local-copilot: team: the server refused the token in $TEAM_TOKEN (401"), shown
    health = health_report(nvim)
    assert "the server refused the token in $TEAM_TOKEN" in health, health
    # the failure went to the log (where :LocalCopilot log leads), the token did not
    assert "refused the token in $TEAM_TOKEN" in wait_for(lambda: log_text(env), what="the log")
    for text in (health, said(nvim), log_text(env)):
        assert wrong not in text and TOKEN not in text


async def test_no_token_sent_says_so(team: LlamaServer, pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    exc = await first_failure(options(team.url, ca_file=str(pki.ca)))
    assert isinstance(exc, TokenRefused)
    assert str(exc) == ("team: the server wants a token and none was sent (401: Invalid API Key); set "
                        "backends.team.api_key_env to the name of an environment variable that holds it")
    monkeypatch.delenv("TEAM_TOKEN", raising=False)
    exc = await first_failure(options(team.url, ca_file=str(pki.ca), api_key_env="TEAM_TOKEN"))
    assert str(exc).startswith("team: the server wants a token and $TEAM_TOKEN is not set, so none was sent")


# -- https:// to a server that speaks plain http ---------------------------------------------


def test_https_to_the_real_plain_http_llama_server_says_it_answers_plain_http(
        llama_server: LlamaServer, open_nvim: Callable[..., Any], nvim_env: dict[str, str], tmp_path: Path) -> None:
    # llama-server without a certificate reads the TLS hello as the start of a request and
    # waits for the rest: it stays silent, the handshake never ends (Python's http.server
    # answers it with a 400 instead)
    https = llama_server.url.replace("http://", "https://")
    said_plain = f"{https} answers plain http, not TLS; set backends.team.url to {llama_server.url}"
    nvim = typing(open_nvim, tmp_path, {**options(https), "debounce_ms": 0}, nvim_env)
    wait_for(lambda: lua(nvim, "require('local_copilot').status()") == "backend down", what="backend down")
    shown = wait_for(lambda: [ln for ln in said(nvim).splitlines() if ln.startswith("local-copilot: team")],
                     what="the message")
    assert shown[0] == f"local-copilot: team: {said_plain}", shown
    health = health_report(nvim)
    assert f"ERROR {said_plain}" in health, health
    assert "cannot reach" not in health and "no answer" not in health, health
    config = tmp_path / "config.json"
    config.write_text(json.dumps(options(https)))
    doctor = subprocess.run([sys.executable, "-m", "local_copilot.cli", "doctor", "--config", str(config)],
                            capture_output=True, text=True, timeout=60, check=False,
                            env=dict(os.environ, PYTHONPATH=str(REPO / "python"), LOCAL_COPILOT_LOG_DIR=str(tmp_path / "log")))
    assert doctor.returncode == 1
    assert f"  ERROR  {said_plain}" in doctor.stdout, doctor.stdout


async def test_the_streaming_client_to_the_plain_http_llama_server_says_so_too(llama_server: LlamaServer) -> None:
    # completions and edits stream through transport/http_stream.py, not httpx
    https = llama_server.url.replace("http://", "https://")
    client = StreamClient(timeout=5, connect_timeout=0.5)
    with pytest.raises(httpx.ConnectError) as caught:
        await client.post(https + "/completion", b'{"prompt": "a", "n_predict": 1}', {})
    said_by = tls_failure("team", load_config(options(https)).backends["team"], caught.value)
    assert str(said_by) == f"team: {https} answers plain http, not TLS; set backends.team.url to {llama_server.url}"
