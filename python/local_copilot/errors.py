"""Exception tree of the plugin.

    LocalCopilotError
    ├── ConfigError          bad option; the message names the field path (`$.backends.vllm.url`)
    └── BackendError         anything between us and the model server
        ├── ServerUnavailable   connection refused, timeouts, 503 while loading
        │   ├── ServerHeld      no request sent: the server asked to wait (Retry-After)
        │   ├── ModelLoading    no request sent: the server is loading the entry's model
        │   └── CertificateRejected  the server's TLS certificate did not pass the check
        ├── ServerError         an HTTP error answer (status and the server's message)
        │   └── TokenRefused    401/403: the token was refused, or none was sent
        └── ProtocolError       a stream that does not follow the server's schema

Expected errors become one concise, rate-limited notification; details go to the log.
"""

from __future__ import annotations

__all__ = [
    "LocalCopilotError",
    "ConfigError",
    "BackendError",
    "ServerUnavailable",
    "ServerHeld",
    "ModelLoading",
    "ServerError",
    "ProtocolError",
    "CertificateRejected",
    "TokenRefused",
    "PrivateText",
    "ForeignServer",
]


class LocalCopilotError(Exception):
    pass


class ConfigError(LocalCopilotError):
    pass


class BackendError(LocalCopilotError):
    pass


class ServerUnavailable(BackendError):
    def __init__(self, message: str, *, unreachable: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        # no connection at all (refused, no route): the server is likely not running, as
        # opposed to one that is loading (503) or too slow to answer
        self.unreachable = unreachable
        # seconds the server asked us to wait before the next request (its Retry-After)
        self.retry_after = retry_after


class ServerHeld(ServerUnavailable):
    """Nothing was sent: the server asked for no requests until `until` (time.time()), by
    its Retry-After on a 429 or 503; the backend holds them back until then."""

    def __init__(self, message: str, *, until: float) -> None:
        super().__init__(message)
        self.until = until


class ModelLoading(ServerUnavailable):
    """Nothing was sent: the server (llama-server in router mode, a llama-swap-style proxy) is
    loading the entry's `model`; requests wait until it has (the status says so meanwhile)."""

    def __init__(self, message: str, *, model: str) -> None:
        super().__init__(message)
        self.model = model


class CertificateRejected(ServerUnavailable):
    """The TLS handshake failed on the server's certificate (an issuer not trusted, another
    name, expired), or https met a plain-http server: nothing was sent; the message names the fix
    (access.py)."""


class ForeignServer(ServerUnavailable):
    """The server on this machine is another user's (owner.py): nothing is sent to it."""


class ServerError(BackendError):
    def __init__(self, message: str, *, status: int = 0, prompt_tokens: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after  # as ServerUnavailable's (a 429's Retry-After)
        # llama.cpp's "exceeds the available context size" error says how long the prompt was
        self.prompt_tokens = prompt_tokens

    @property
    def context_overflow(self) -> bool:
        return self.status == 400 and ("context" in str(self) or self.prompt_tokens is not None)


class TokenRefused(ServerError):
    """A 401 or 403: the server refused the entry's token, or wanted one and none was sent."""


class ProtocolError(BackendError):
    pass


class PrivateText(LocalCopilotError):
    """The privacy policy (privacy.py) refuses to send this text; the message says why."""


class ServerStartError(LocalCopilotError):
    """A model server could not be started or kept running. `str()` is one line that names the
    fix; `log_tail` holds the server's last log lines for the details view."""

    def __init__(self, message: str, *, log_tail: list[str] | None = None, log_path: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail or []
        self.log_path = log_path


__all__.append("ServerStartError")
