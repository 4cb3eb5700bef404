"""access.py: an entry's trust and token, and what goes wrong at that level said in one line.
(The real TLS handshakes with a private CA are in tests/integration/test_tls_tokens.py.)"""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import certifi
import pytest

from local_copilot.backend_bench.cli import parse_target
from local_copilot.config import load_config
from local_copilot.errors import CertificateRejected, ConfigError, ServerError, TokenRefused
from local_copilot.transport.access import tls_context
from local_copilot.transport.plain_http import answers_plain_http

from ..fakes.fake_server import FakeServer
from ..helpers import first_failure

KEY = "sk-unit-4be19f0a"


@pytest.fixture()
def servers() -> Iterator[list[FakeServer]]:
    made: list[FakeServer] = []
    yield made
    for s in made:
        s.close()


def test_a_ca_file_no_handshake_could_use_is_a_bad_option_naming_its_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"`\$\.backends\.team\.ca_file` = '/nope/team-ca\.pem' is no file; give the "
                                          r"path of the CA's certificate in PEM form"):
        load_config({"backends": {"team": {"url": "https://team:8443", "ca_file": "/nope/team-ca.pem"}}})
    junk = tmp_path / "notes.txt"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"`\$\.backends\.team\.ca_file` = '.*notes\.txt' holds no PEM certificate"):
        load_config({"backends": {"team": {"url": "https://team:8443", "ca_file": str(junk)}}})
    # with tls_verify = false nothing is checked, so the file is not needed
    load_config({"backends": {"team": {"url": "https://team:8443", "ca_file": "/nope", "tls_verify": False}}})


def test_contexts_are_built_once_per_trust() -> None:
    plain = load_config({}).active
    unchecked = load_config({"backends": {"llama.cpp": {"tls_verify": False}}}).active
    assert tls_context(plain) is tls_context(plain) is tls_context(None)
    assert tls_context(unchecked) is not tls_context(plain)
    assert tls_context(unchecked).check_hostname is False


async def failure(url: str, client_timeout: float = 5.0, **entry: Any) -> Exception:
    return await first_failure({"backends": {"team": {"url": url, **entry}}}, client_timeout=client_timeout)


def refusing(status: int, message: str) -> Any:
    def script(path: str, body: dict[str, Any]) -> tuple[int, list[Any], dict[str, str]]:
        return status, [json.dumps({"error": {"message": message}}).encode()], {"content-type": "application/json"}
    return script


async def test_a_refused_token_is_said_by_name_and_never_quoted(servers: list[FakeServer],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_TOKEN", KEY)
    server = FakeServer(refusing(401, f"invalid api key {KEY}"))
    servers.append(server)
    exc = await failure(server.url, api_key_env="TEAM_TOKEN")
    assert isinstance(exc, TokenRefused) and exc.status == 401
    assert str(exc) == "team: the server refused the token in $TEAM_TOKEN (401: invalid api key ***)"
    assert server.requests[0][1]["_headers"]["authorization"] == f"Bearer {KEY}"
    forbidden = FakeServer(refusing(403, "forbidden"))
    servers.append(forbidden)
    assert str(await failure(forbidden.url, api_key_env="TEAM_TOKEN")) == \
        "team: the server refused the token in $TEAM_TOKEN (403: forbidden)"
    # any other error that quotes the key is cut too
    echo = FakeServer(refusing(500, f"boom near {KEY}"))
    servers.append(echo)
    exc = await failure(echo.url, api_key_env="TEAM_TOKEN")
    assert type(exc) is ServerError and KEY not in str(exc) and "boom near ***" in str(exc)


async def test_https_to_a_plain_http_server_says_so() -> None:
    # Python's own HTTP server: it answers the TLS hello with "400 Bad request" in plain text
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"https://127.0.0.1:{server.server_address[1]}"
        exc = await failure(url)
    finally:
        server.shutdown()
        server.server_close()
    assert isinstance(exc, CertificateRejected)
    assert str(exc) == (f"team: {url} answers plain http, not TLS; set backends.team.url to "
                        f"http://127.0.0.1:{server.server_address[1]}")


async def test_https_to_a_port_that_never_answers_is_no_plain_http_server_and_waits_no_longer(
        silent_port: int) -> None:
    # the plain-http probe after a failed handshake is bounded: a dead port is still "cannot reach"
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert not await answers_plain_http("127.0.0.1", silent_port, timeout_s=0.3)
    assert loop.time() - start < 1.0
    url = f"https://127.0.0.1:{silent_port}"
    exc = await failure(url, client_timeout=0.5)
    assert not isinstance(exc, CertificateRejected) and "cannot reach" in str(exc), exc


def test_the_bench_takes_the_ca_file_and_tls_verify(tmp_path: Path) -> None:
    pem = certifi.where()
    target = parse_target(f"team=https://127.0.0.1:9,kind=openai,ca_file={pem},tls_verify=false", {})
    assert (target.cfg.ca_file, target.cfg.tls_verify, target.cfg.kind) == (pem, False, "openai")
    with pytest.raises(ConfigError, match=r"ca_file '/nope' is no file"):
        parse_target("team=https://127.0.0.1:9,kind=openai,ca_file=/nope", {})
