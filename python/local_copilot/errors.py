"""Exception tree of the plugin: every error it reports is one of these.

    LocalCopilotError
    ├── ConfigError             bad option; the message names the field path (`$.backends.vllm.url`)
    │   └── UnknownTemplateError    `fim_template` names no template (also a ValueError)
    ├── BackendError            anything between us and the model server
    │   ├── ServerUnavailable       connection refused, timeouts, 503 while loading
    │   │   ├── ServerHeld              no request sent: the server asked to wait (Retry-After)
    │   │   ├── ModelLoading            no request sent: the server is loading the entry's model
    │   │   ├── CertificateRejected     the server's TLS certificate did not pass the check
    │   │   └── ForeignServer           the loopback server is another user's: nothing sent
    │   ├── ServerError             an HTTP error answer (status and the server's message)
    │   │   └── TokenRefused            401/403: the token was refused, or none was sent
    │   └── ProtocolError           an answer that does not follow the server's schema
    │       ├── StreamLineTooLong       a stream line, event or stream over the limits (also a ValueError)
    │       ├── NotAStream              a line that is no event-stream field (also a ValueError)
    │       └── ErrorEvent              the server's `error:` field in the stream (also a ValueError)
    ├── PrivateText             the privacy policy refuses to send this text
    ├── TooLarge                an instruction edit's selection and answer do not fit the server's context
    └── ServerStartError        a model server could not be started or kept running

Expected errors become one concise, rate-limited notification; details go to the log.

Outside the tree, private to the modules that raise and catch them and never shown as an
error: `pipeline/reading.py`'s `PromptTooLong` and `Stop` (a request to retry; a caller's
callback abandoning a completion), `nvim/protocol.py`'s
`ProtocolViolation` (an event from a Lua side of another version: logged by the plugin), and
`devtools/rplugin.py`'s `RegistrationError` (the tests' and benchmarks' set-up).
"""

from __future__ import annotations

__all__ = [
    "LocalCopilotError",
    "ConfigError",
    "UnknownTemplateError",
    "BackendError",
    "ServerUnavailable",
    "ServerHeld",
    "ModelLoading",
    "CertificateRejected",
    "ForeignServer",
    "ServerError",
    "TokenRefused",
    "ProtocolError",
    "StreamLineTooLong",
    "NotAStream",
    "ErrorEvent",
    "PrivateText",
    "TooLarge",
    "ServerStartError",
]


class LocalCopilotError(Exception):
    pass


class ConfigError(LocalCopilotError):
    pass


class UnknownTemplateError(ConfigError, ValueError):
    """`fim_template` names no template; the message lists every valid name."""


class BackendError(LocalCopilotError):
    pass


class ServerUnavailable(BackendError):
    def __init__(self, message: str, *, unreachable: bool = False, retry_after: float | None = None,
                 backend: str = "") -> None:
        super().__init__(message)
        # no connection at all (refused, no route): the server is likely not running, as
        # opposed to one that is loading (503) or too slow to answer
        self.unreachable = unreachable
        # the backend entry whose server nothing answers for (with `unreachable`), so the
        # message can say how to start that one
        self.backend = backend
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
    (transport/access.py)."""


class ForeignServer(ServerUnavailable):
    """The server on this machine is another user's (transport/owner.py): nothing is sent to it."""


class ServerError(BackendError):
    def __init__(self, message: str, *, status: int = 0, prompt_tokens: int | None = None,
                 retry_after: float | None = None, context_tokens: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after  # as ServerUnavailable's (a 429's Retry-After)
        # llama.cpp's "exceeds the available context size" error says how long the prompt was
        self.prompt_tokens = prompt_tokens
        # and how many tokens the server's context holds (llama.cpp's n_ctx, or the number in
        # an OpenAI-style "maximum context length is N tokens")
        self.context_tokens = context_tokens

    @property
    def context_overflow(self) -> bool:
        return self.status == 400 and ("context" in str(self) or self.prompt_tokens is not None)


class TokenRefused(ServerError):
    """A 401 or 403: the server refused the entry's token, or wanted one and none was sent."""


class ProtocolError(BackendError):
    pass


class StreamLineTooLong(ProtocolError, ValueError):
    """A ProtocolError, so the engine reports it like any bad stream (one notification, the
    backend marked down); a plain ValueError went the "internal error" way instead
    (tests/integration/test_faults.py, one 10 MB chunk)."""


class NotAStream(ProtocolError, ValueError):
    """A line that is no event-stream field: the server answered something else (an HTML
    page, plain text). `sample` holds the line's start; transport/exchange.py names the server."""

    def __init__(self, sample: bytes) -> None:
        super().__init__(f"not a completion stream: {sample[:60]!r}")
        self.sample = sample[:60]


class ErrorEvent(ProtocolError, ValueError):
    """The server's `error:` field in the stream (llama-server's way of failing mid-answer)."""


class PrivateText(LocalCopilotError):
    """The privacy policy (privacy/policy.py) refuses to send this text; the message says why."""


class TooLarge(LocalCopilotError):
    """An instruction edit's selection and its answer do not fit in the context the server
    gives a request (instruct/prompt.py); the message says how large each is."""


class ServerStartError(LocalCopilotError):
    """A model server could not be started or kept running. `str()` is one line that names the
    fix; `log_tail` holds the server's last log lines for the details view."""

    def __init__(self, message: str, *, log_tail: list[str] | None = None, log_path: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail or []
        self.log_path = log_path
