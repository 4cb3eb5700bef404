"""How the plugin reaches one backend entry's server: its TLS context and its token.

Both HTTP stacks ask here: the completion client (http_stream.py) takes `tls_context(cfg)`,
httpx clients are made by `async_client()` / `sync_client()` (one transport per https origin
whose entry has its own trust), and every request carries `auth_headers(cfg)`. Every path
that talks to a server (completions, next edits, instruction edits, probes, health and
`doctor`, the supervisor, the bench, the CLI) goes through these, so an entry's `ca_file`,
`tls_verify` and `api_key_env` hold everywhere alike. A fallback to another entry uses the
same calls with that entry's options.

What goes wrong at this level is said here in one line each: a certificate that does not pass
the check (`tls_failure`: untrusted issuer, another name, expired), a token the server refuses
(`token_refused`). The token itself is only ever put into an Authorization header: messages
pass through `redact()` before anyone sees them.
"""

from __future__ import annotations

import os
import ssl
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from ..errors import CertificateRejected, TokenRefused
from .limits import CappedTransport
from .plain_http import AnswersPlainHttp, PlainHttpCheck

if TYPE_CHECKING:
    from ..backend_config import BackendConfig

__all__ = ["async_client", "auth_headers", "ca_file_problem", "certificate_error", "certificate_verdict", "redact", "sync_client",
           "tls_context", "tls_failure", "token_refused"]

_lock = threading.Lock()
# (ca_file, its mtime and size, verify) -> context: building one loads the system's and
# certifi's roots (~40 ms), so each is built once per process, and anew when the file changes
_contexts: dict[tuple[str, int, int, bool], ssl.SSLContext] = {}


def _ca_path(ca_file: str) -> str:
    return str(Path(ca_file).expanduser()) if ca_file else ""


def ca_file_problem(ca_file: str) -> str | None:
    """What makes `ca_file` unusable as a trust bundle, or None (config.py says it once)."""
    path = _ca_path(ca_file)
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        probe.load_verify_locations(cafile=path)
    except FileNotFoundError:
        return "is no file"
    except IsADirectoryError:
        return "is a directory, not a PEM file"
    except PermissionError:
        return "cannot be read (permission denied)"
    except (ssl.SSLError, OSError, ValueError):
        return "holds no PEM certificate"
    if not probe.cert_store_stats().get("x509"):
        return "holds no PEM certificate"
    return None


def tls_context(cfg: BackendConfig | None = None) -> ssl.SSLContext:
    """The context that checks the certificate of `cfg`'s server: the system's roots and
    certifi's (what browsers and httpx trust), plus the entry's `ca_file`; with
    `tls_verify = false`, one that checks nothing. None: the default one."""
    ca = _ca_path(cfg.ca_file) if cfg is not None else ""
    verify = cfg.tls_verify if cfg is not None else True
    try:
        st = os.stat(ca) if ca and verify else None
    except OSError:
        st = None
    key = (ca if verify else "", st.st_mtime_ns if st else 0, st.st_size if st else 0, verify)
    with _lock:
        ctx = _contexts.get(key)
        if ctx is None:
            ctx = _contexts[key] = _build(ca, verify)
        return ctx


def _build(ca: str, verify: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    try:
        import certifi

        ctx.load_verify_locations(cafile=certifi.where())
    except (ImportError, OSError, ssl.SSLError):
        pass  # the system's roots alone
    if ca:
        ctx.load_verify_locations(cafile=ca)  # checked when the options were loaded
    return ctx


def auth_headers(cfg: BackendConfig) -> dict[str, str]:
    """The Authorization header `cfg.api_key_env` asks for (none when it is unset or empty)."""
    if cfg.api_key_env:
        key = os.environ.get(cfg.api_key_env, "")
        if key:
            return {"Authorization": f"Bearer {key}"}
    return {}


def redact(text: str, cfg: BackendConfig) -> str:
    """`text` without the entry's token (a server may quote the key it refused)."""
    key = os.environ.get(cfg.api_key_env, "") if cfg.api_key_env else ""
    return text.replace(key, "***") if key and len(key) >= 4 else text


# -- httpx clients -------------------------------------------------------------------------


def _origin(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme != "https" or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"https://{host}" + (f":{port}" if port else "")


def async_client(entries: Iterable[BackendConfig], *, timeout: Any, transport: httpx.AsyncBaseTransport | None = None,
                 capped: bool = True, **kwargs: Any) -> httpx.AsyncClient:
    """An httpx client for the servers of `entries`: an https origin gets a transport with
    its entry's trust (the first entry that names it decides); anything else the default
    trust. `capped`: answers bounded and loopback servers checked (limits.py). `transport`
    (tests, the bench's fakes) replaces the network for every origin."""
    def wrap(inner: httpx.AsyncBaseTransport) -> httpx.AsyncBaseTransport:
        return CappedTransport(inner) if capped else inner

    mounts: dict[str, httpx.AsyncBaseTransport | None] = {}
    if transport is None:
        # (a failed TLS connection asks whether the port speaks plain http: plain_http.py)
        for cfg in entries:
            origin = _origin(cfg.url)
            if origin and origin not in mounts and (cfg.ca_file or not cfg.tls_verify):
                mounts[origin] = wrap(PlainHttpCheck(httpx.AsyncHTTPTransport(verify=tls_context(cfg), **_pool(kwargs))))
        transport = PlainHttpCheck(httpx.AsyncHTTPTransport(verify=tls_context(), **_pool(kwargs)))
    return httpx.AsyncClient(timeout=timeout, transport=wrap(transport), mounts=mounts or None, trust_env=False,
                             **kwargs)


def _pool(kwargs: dict[str, Any]) -> dict[str, Any]:
    # a client's `limits` only reach its default transport: the mounted ones get them here
    return {"limits": kwargs["limits"]} if "limits" in kwargs else {}


def sync_client(cfg: BackendConfig | None, *, timeout: float) -> httpx.Client:
    """A blocking client for one entry's server (the supervisor's health polls, the CLI), its
    token sent with every request."""
    return httpx.Client(timeout=timeout, verify=tls_context(cfg), trust_env=False,
                        headers=auth_headers(cfg) if cfg is not None else None)


# -- what went wrong -----------------------------------------------------------------------


def _chain(exc: BaseException | None) -> Iterable[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def certificate_error(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate check that failed under `exc` (httpx or http_stream wrap it), or None."""
    return next((e for e in _chain(exc) if isinstance(e, ssl.SSLCertVerificationError)), None)


def _plain_http(exc: BaseException) -> bool:
    """Whether the TLS connection failed on a server that speaks plain http: OpenSSL read its
    answer to the hello, or the port answered a plain request (plain_http.py)."""
    return any(isinstance(e, AnswersPlainHttp) or (isinstance(e, ssl.SSLError) and "WRONG_VERSION_NUMBER" in str(e))
               for e in _chain(exc))


def _as_http(url: str) -> str:
    """`url` (https) with the scheme that its server speaks, at the same port."""
    parts = urlsplit(url)
    netloc = parts.netloc if parts.port is not None else f"{parts.netloc}:443"
    return parts._replace(scheme="http", netloc=netloc).geturl()


# OpenSSL's X509_V_ERR_* codes, grouped by what the user does about them
_UNTRUSTED = {2, 18, 19, 20, 21, 24, 27, 28}
_NAME = {62, 64}
_EXPIRED = {10}
_NOT_YET = {9}


def certificate_verdict(err: ssl.SSLCertVerificationError) -> tuple[str, str]:
    """(what is wrong, what to do) for a failed certificate check, in the user's words."""
    code = err.verify_code
    said = err.verify_message or err.reason or "certificate verify failed"
    if code in _UNTRUSTED:
        return f"is not trusted ({said})", "set ca_file to the PEM of the CA that issued it"
    if code in _NAME:
        return f"is for another name ({said})", "use the host name the certificate names in url"
    if code in _EXPIRED:
        return "has expired", "renew the server's certificate"
    if code in _NOT_YET:
        return "is not valid yet (check both clocks)", "renew the server's certificate or fix the clock"
    return f"did not pass the check ({said})", "see :checkhealth local_copilot for the certificate"


def tls_failure(name: str, cfg: BackendConfig, exc: BaseException) -> CertificateRejected | None:
    """The one-line error a failed TLS handshake with `cfg`'s server means, or None when
    `exc` is no TLS failure."""
    err = certificate_error(exc)
    if err is not None:
        what, fix = certificate_verdict(err)
        field = "url" if "url" in fix else "ca_file"
        fix = fix.replace(field, f"backends.{name}.{field}", 1)
        return CertificateRejected(f"{name}: the certificate of {cfg.url} {what}; {fix}")
    if _plain_http(exc):
        return CertificateRejected(f"{name}: {cfg.url} answers plain http, not TLS; "
                                   f"set backends.{name}.url to {_as_http(cfg.url)}")
    return None


def token_refused(name: str, cfg: BackendConfig, status: int, server_says: str) -> TokenRefused:
    """The error a 401 or 403 means: whose token was refused, or that none was sent."""
    said = redact(f" ({status}: {server_says})" if server_says else f" ({status})", cfg)
    if cfg.api_key_env and os.environ.get(cfg.api_key_env):
        message = f"{name}: the server refused the token in ${cfg.api_key_env}{said}"
    elif cfg.api_key_env:
        message = (f"{name}: the server wants a token and ${cfg.api_key_env} is not set, so none was sent{said}; "
                   f"set it where Neovim starts")
    else:
        message = (f"{name}: the server wants a token and none was sent{said}; set backends.{name}.api_key_env "
                   f"to the name of an environment variable that holds it")
    return TokenRefused(message, status=status)
