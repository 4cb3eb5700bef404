"""How one server's failures read for the user, and the wait it asked for.

One `Faults` per backend entry, shared by its probes (httpx) and its exchanges (exchange.py):
an HTTP status other than 200 as the BackendError it means (a refused token said as such, the
entry's token never quoted), a connection that failed or timed out as "cannot reach" or "no
answer in time" (a certificate's verdict as what it is), and the server's Retry-After, which
holds every request to it until then. What happens below HTTP is the transport's; the one
thing told upward is the event `lost`: the server could not be reached, so its backend
forgets what it probed (a server that comes back may be another one).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx

from ..errors import ServerError, ServerHeld, ServerUnavailable
from .access import redact, tls_failure, token_refused
from .http_stream import StreamResponse
from .status import raise_for_status

if TYPE_CHECKING:
    from ..backend_config import BackendConfig

__all__ = ["Faults"]


class Faults:
    def __init__(self, name: str, cfg: BackendConfig, lost: Callable[[], None]) -> None:
        self.name = name
        self.cfg = cfg
        self._lost = lost
        # time.monotonic() before which nothing is sent: the server's Retry-After (hold())
        self._held_until = 0.0

    def hold(self, seconds: float) -> None:
        """Send nothing to this server for `seconds` (it asked so: Retry-After)."""
        self._held_until = max(self._held_until, time.monotonic() + seconds)

    def check_held(self) -> None:
        """Raises ServerHeld while the server asked for no requests; called before each one."""
        if not self._held_until:
            return
        left = self._held_until - time.monotonic()
        if left <= 0:
            self._held_until = 0.0
            return
        until = time.time() + left
        raise ServerHeld(f"{self.name}: waiting for the server until {time.strftime('%H:%M:%S', time.localtime(until))}"
                         " (it asked to wait: Retry-After)", until=until)

    async def raise_for_status(self, response: httpx.Response | StreamResponse) -> None:
        try:
            await raise_for_status(self.name, response, self.cfg.url)
        except ServerError as exc:
            if exc.status in (401, 403):  # whose token was refused, or that none was sent
                said = str(exc).partition(f"HTTP {exc.status}: ")[2]
                raise token_refused(self.name, self.cfg, exc.status, said) from None
            if exc.retry_after:
                self.hold(exc.retry_after)
            exc.args = (redact(str(exc), self.cfg),)
            raise
        except ServerUnavailable as exc:
            if exc.retry_after:
                self.hold(exc.retry_after)
            raise

    def unreachable(self, exc: Exception) -> ServerUnavailable:
        """The error a failed connection or a timeout means for the user (and `lost` told)."""
        self._lost()
        cfg = self.cfg
        tls = tls_failure(self.name, cfg, exc) if cfg.url.startswith("https://") else None
        if tls is not None:  # a certificate is no connection problem: said as what it is
            return tls
        if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
            return ServerUnavailable(f"{self.name}: no answer from {cfg.url} in time")
        return ServerUnavailable(f"{self.name}: cannot reach {cfg.url} ({exc.__class__.__name__})", unreachable=True,
                                 backend=self.name)

    def foreign(self, what: str) -> str:
        """What an answer that is no completion (an HTML page, plain text) is said as."""
        return (f"{self.name}: the server at {self.cfg.url} answered {what}, not a completion stream"
                " (is that address the model server's, not a proxy's or a web page's?)")
