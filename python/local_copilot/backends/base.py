"""The backend interface: a FIM request in, an async stream of text chunks out."""

from __future__ import annotations

import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Iterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import httpx
import msgspec

from ..errors import ProtocolError, ServerUnavailable
from ..prompt.request import FimRequest
from ..transport.access import auth_headers, tls_context
from ..transport.exchange import Exchange, Link, Wire
from ..transport.faults import Faults
from ..transport.http_stream import StreamClient, StreamResponse
from ..transport.limits import server_words
from ..transport.status import MAX_RETRY_AFTER_S, _context_tokens, raise_for_status, retry_after
from . import registry
from .capabilities import UNPROBED, Capabilities
from .served import Served
from .slots import Slots

if TYPE_CHECKING:
    from ..backend_config import BackendConfig
    from .slots import SlotState

__all__ = ["Backend", "Capabilities", "Chunk", "Exchange", "FimRequest", "HttpBackend", "MAX_RETRY_AFTER_S", "Wire",
           "auth_headers", "connect_errors", "raise_for_status", "retry_after"]
_context_tokens = _context_tokens  # (tests read it here)


class Chunk(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    done: bool = False
    # server counters on the last chunk, when it reports them (tokens, ms)
    timings: dict[str, float] | None = None
    # prompt tokens the server counted (to calibrate the token estimator)
    prompt_tokens: int | None = None
    # which candidate this text belongs to when n > 1
    # the server slot that ran the request, on the last chunk, where the server says (llama.cpp)
    slot: int | None = None
    index: int = 0
    # more chunks from the same network read follow at once (post-process after the last)
    more: bool = False
    # the texts of the stream events merged into this one (about a token each), when merged
    parts: tuple[str, ...] = ()


def batched(decode: Callable[[bytes], Chunk], batch: list[bytes]) -> Iterator[Chunk]:
    """The payloads of one network read decoded in order, all but the last marked `more`."""
    last = len(batch) - 1
    for i, payload in enumerate(batch):
        chunk = decode(payload)
        yield msgspec.structs.replace(chunk, more=True) if i < last else chunk


class Backend(Protocol):
    # (read-only properties: a dialect may compute them from what it probed; `caps` holds
    # them all as the probe left them, which is what the keystroke path reads)
    @property
    def caps(self) -> Capabilities:
        """What the server can do, resolved once it was probed (UNPROBED before, and again
        after forget()): one frozen struct, replaced as a whole."""
        ...

    async def capabilities(self) -> Capabilities:
        """`caps`, the server probed first if need be."""
        ...

    @property
    def name(self) -> str: ...

    @property
    def stop_strings(self) -> tuple[str, ...]:
        """Strings that end a completion (the FIM template's special tokens), cut client-side too."""
        ...

    @property
    def style(self) -> str:
        """The prompt style in use: 'fim', 'continue' or 'chat' (prompt/styles.py); known once
        the server was probed (context_limit() probes it)."""
        ...

    @property
    def supports_n(self) -> bool:
        """Whether one request can return several candidates (FimRequest.n)."""
        ...

    @property
    def warms(self) -> bool:
        """Whether a request can evaluate the prompt and generate nothing (a warm-up)."""
        ...

    @property
    def clock_timed(self) -> bool:
        """Whether the server counts tokens but says no times, so the client's clock times its
        answers (prompt/speed.py, observe_client)."""
        ...

    @property
    def places_in_slots(self) -> bool:
        """Whether the server runs each request in one of several slots of its own choosing
        and says which on the answer's last chunk (llama-server), so that a buffer's later
        requests can name it (backends/slots.py, pipeline/placing.py)."""
        ...

    @property
    def continues(self) -> bool:
        """Whether a request can continue a text: the prompt ends with the start of the middle,
        so the same prompt plus the text so far asks for what follows it (staged requests)."""
        ...

    @property
    def counts_full_prompt(self) -> bool:
        """Whether the prompt token count the server reports is of the whole prompt we sent;
        servers that cut the prompt first (llama.cpp /infill, Ollama's num_ctx) under-count
        it, and calibrating on that would make every later prompt too big."""
        ...

    async def context_limit(self) -> int | None:
        """Tokens one request may use (per-slot context), or None when the server won't say."""
        ...

    async def slot_states(self) -> list[SlotState] | None:
        """The server's slots as it shows them now (backends/slots.py), None where it does not
        show them or does not answer at once."""
        ...

    @property
    def slots(self) -> Slots:
        """Which slot holds each buffer's prompt, as this editor's requests to the server left
        them (backends/slots.py; every request sent through an Exchange tells it)."""
        ...

    def complete(self, req: FimRequest) -> AsyncIterator[Chunk]:
        """Stream the completion; closing the iterator closes the HTTP stream (cancel)."""
        ...

    async def exchange(self, req: FimRequest) -> Exchange:
        """The request, prepared (the server probed first if need be), not sent yet."""
        ...

    async def ready(self, timeout_s: float) -> bool:
        """Whether the server answers its kind's ready path now (with the entry's token)."""
        ...

    @property
    def probed(self) -> bool:
        """Whether the server was probed as far as requests need: a request can then be
        prepared and sent without waiting on anything but its own answer."""
        ...

    def close(self) -> None:
        """Drop kept connections (the backend is being replaced or the host stops)."""
        ...

    async def described(self) -> Served:
        """What :checkhealth tells of the server: its model, how prompts are built, its context."""
        ...

    def context_advice(self, backend: str, need: int, slots: int) -> list[str]:
        """How to give each request at least `need` tokens of context on such a server."""
        ...


# what "the server is not there" looks like in httpx
connect_errors = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError)


T = TypeVar("T")
C = TypeVar("C", bound=Chunk)


class OpenAIEvent(Protocol):
    """What an OpenAI-style stream event has (/v1/completions, /v1/chat/completions)."""

    @property
    def choices(self) -> list[Any]: ...

    @property
    def usage(self) -> Any: ...  # prompt_tokens, completion_tokens


E = TypeVar("E", bound=OpenAIEvent)


class HttpBackend:
    """What every dialect shares: auth, error translation, probes, and the exchanges a dialect
    fills with its own request (wire) and reads with its own events (decode)."""

    # llama.cpp's n_predict 0 evaluates the prompt only; OpenAI's max_tokens 0 is refused by vLLM
    # and Ollama's num_predict 0 means its default: no warm-up there
    warms = False
    clock_timed = False
    places_in_slots = False
    # the prompt style (prompt/styles.py) and why, as decided when the server was probed
    style = "fim"
    style_reason = ""

    # what the server can do, as the last probe found it (capabilities())
    caps: Capabilities = UNPROBED

    def __init__(self, name: str, cfg: BackendConfig, client: httpx.AsyncClient) -> None:
        self.name = name
        self.cfg = cfg
        self.client = client  # probes (small JSON requests)
        # the completion streams, with the entry's trust (access.py)
        self.streams = StreamClient(timeout=cfg.timeout_ms / 1000, tls=self.tls())
        self.base = cfg.url.rstrip("/")
        # its failures as the user reads them, and its Retry-After (shared with its exchanges);
        # the server lost, what was probed is forgotten
        self.faults = Faults(name, cfg, self.forget)
        # the server's slots as this editor's requests left them (named where places_in_slots)
        self.slots = Slots()

    def close(self) -> None:
        self.streams.close()

    # -- the dialect's part --------------------------------------------------------------

    async def ensure_ready(self) -> Any:
        """Probe the server as far as wire() needs (once; forget() starts over)."""

    def wire(self, req: FimRequest) -> Wire:
        """The completion request's path and body, its stream's parser and what its final
        payload looks like (once ensure_ready() has run)."""
        raise NotImplementedError

    def decode(self, payload: bytes) -> Chunk:
        """One stream payload (or a whole unstreamed answer) as a chunk."""
        raise NotImplementedError

    def chunks(self, batch: list[bytes]) -> Iterable[Chunk]:
        """One network read's payloads as chunks."""
        return batched(self.decode, batch)

    async def slot_states(self) -> list[SlotState] | None:
        return None  # (a server of slots says: llama_cpp.py)

    def forget(self) -> None:
        """The server went away: what was probed may differ when it comes back (a dialect's
        own forget() starts here)."""
        self.caps = UNPROBED

    async def capabilities(self) -> Capabilities:
        """What the server can do, probed first if need be: resolved once from the dialect's
        own answers, kept until forget() (the keystroke path reads `caps`, not the dialect)."""
        caps = self.caps
        if caps.probed:
            return caps
        dialect = cast("Backend", self)  # (every dialect has the Backend protocol's members)
        context = await dialect.context_limit()  # probes the server as far as requests need
        caps = Capabilities(probed=dialect.probed, context=context, style=self.style,
                            stop_strings=tuple(dialect.stop_strings), continues=dialect.continues,
                            counts_full_prompt=dialect.counts_full_prompt, places_in_slots=self.places_in_slots,
                            supports_n=dialect.supports_n, warms=self.warms, clock_timed=self.clock_timed)
        if caps.probed:
            self.caps = caps
        return caps

    # -- raw completions (next edits: the prompt as rendered, the model's tokens honoured) --

    async def raw_wire(self, prompt: str, n_predict: int, stop: tuple[str, ...]) -> Wire:
        """A streamed raw completion of `prompt`, at most `n_predict` tokens, greedy."""
        raise NotImplementedError(f"{self.name}: no raw completion endpoint")

    async def served_model(self) -> str:
        """The served model's name (or path), as the server tells it."""
        return self.cfg.model

    async def single_tokens(self, texts: tuple[str, ...]) -> frozenset[str]:
        """Which of `texts` are one token in the served model's vocabulary (where the server
        can say)."""
        return frozenset()

    # -- what :checkhealth tells of the server ------------------------------------------------

    async def described(self) -> Served:
        """The served model and how prompts are built for it, the server probed as far as
        completions need (ensure_ready())."""
        await self.ensure_ready()
        model = await self.served_model()
        # (every dialect has context_limit(): the Backend protocol's)
        return Served(model=model or "(not named)", hint=model, context=await cast("Backend", self).context_limit())

    @staticmethod
    def context_advice(backend: str, need: int, slots: int) -> list[str]:
        """How to give each request at least `need` tokens of context on such a server
        (`backend`: the entry's name; `slots`: requests it runs at once)."""
        return ["give the model a larger context where its server is started"]

    @property
    def probed(self) -> bool:
        return False  # (dialects that know say so)

    async def ready(self, timeout_s: float) -> bool:
        path = registry.get(self.cfg.kind).ready_path
        try:
            response = await self.client.get(self.base + path, headers=self.headers(), timeout=timeout_s)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    # -- requests ------------------------------------------------------------------------

    async def exchange(self, req: FimRequest) -> Exchange:
        if not self.caps.probed:
            await self.capabilities()  # (probes the server first)
        return Exchange(self.link(), self.wire(req), quick=req.quick, slot=req.slot)

    def link(self) -> Link:
        """What an exchange of this backend's reaches the server through (transport/exchange.py)."""
        return Link(self.base, self.streams, self.headers(), self.faults, self.chunks, self.decode, self.slots)

    async def complete(self, req: FimRequest) -> AsyncGenerator[Chunk, None]:
        exchange = await self.exchange(req)
        async with aclosing(exchange.chunks()) as chunks:
            async for chunk in chunks:
                yield chunk

    def headers(self) -> dict[str, str]:
        return auth_headers(self.cfg)

    def tls(self) -> ssl.SSLContext | None:
        """The context that checks this entry's https server (None for http)."""
        return tls_context(self.cfg) if self.cfg.url.startswith("https://") else None

    async def raise_for_status(self, response: httpx.Response | StreamResponse) -> None:
        await self.faults.raise_for_status(response)

    def hold(self, seconds: float) -> None:
        """Send nothing to this server for `seconds` (it asked so: Retry-After)."""
        self.faults.hold(seconds)

    def check_held(self) -> None:
        """Raises ServerHeld while the server asked for no requests; called before each one."""
        self.faults.check_held()

    def _message(self, decoder: msgspec.json.Decoder[T], payload: bytes) -> T:
        """One stream payload decoded strictly; a malformed one, or one that carries the
        server's `error`, raises ProtocolError with the server's words."""
        try:
            msg = decoder.decode(payload)
        except (msgspec.DecodeError, ValueError) as exc:
            raise ProtocolError(f"{self.name}: malformed stream chunk ({exc})") from None
        error = getattr(msg, "error", None)
        if error is not None:
            raise ProtocolError(f"{self.name}: server error in stream: {server_words(error)}")
        return msg

    def _openai_event(self, decoder: msgspec.json.Decoder[E], payload: bytes, chunk: type[C],
                      usage_timings: Callable[[E], dict[str, float]]) -> E | C:
        """One event of an OpenAI-style stream: its end ('[DONE]') and an event with no choices
        (the usage event, its counts as `usage_timings(event)`, or an empty one) as a `chunk`;
        else the event (`_message`), whose first choice the caller reads."""
        if payload == b"[DONE]":
            return chunk(text="", done=True)
        msg = self._message(decoder, payload)
        if msg.choices:
            return msg
        if msg.usage is None:
            return chunk(text="")
        return chunk(text="", prompt_tokens=msg.usage.prompt_tokens, timings=usage_timings(msg))

    def unreachable(self, exc: Exception) -> ServerUnavailable:
        """The error a failed connection or a timeout means for the user (what was probed is
        forgotten)."""
        return self.faults.unreachable(exc)

    async def fetch(self, method: str, path: str, decoder: msgspec.json.Decoder[T], *, json: Any = None,
                    timeout_s: float | None = None) -> T:
        """One small JSON request (a probe), decoded strictly; `timeout_s`: shorter than the
        client's own timeout."""
        self.check_held()
        timeout = httpx.USE_CLIENT_DEFAULT if timeout_s is None else timeout_s
        try:
            resp = await self.client.request(method, self.base + path, json=json, headers=self.headers(),
                                             timeout=timeout)
        except (httpx.TransportError, httpx.InvalidURL) as exc:  # every way a request fails below HTTP
            raise self.unreachable(exc) from exc
        await self.raise_for_status(resp)
        try:
            return decoder.decode(resp.content)
        except msgspec.DecodeError as exc:
            raise ProtocolError(f"{self.name}: {path} answered something else ({exc})") from None
