"""What an HTTP answer other than 200 means: the BackendError it raises, with the server's own
words (bounded), the wait its Retry-After asks for, and the context size a context-overflow
error names. Probes (httpx) and completion streams (http_stream.py) read the same way."""

from __future__ import annotations

import email.utils
import math
import re
import time
from datetime import UTC
from typing import Any
from urllib.parse import urljoin

import httpx
import msgspec

from ..errors import ServerError, ServerUnavailable
from .http_stream import StreamResponse
from .limits import MAX_SERVER_MESSAGE_CHARS, clip_message, read_error_body

__all__ = ["MAX_RETRY_AFTER_S", "error_message", "raise_for_status", "retry_after"]


def _error_object(body: bytes) -> Any:
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    return doc.get("error") if isinstance(doc, dict) else None


def error_message(body: bytes) -> str:
    """The server's own message from {"error": {"message": ...}} or {"error": "..."}."""
    err = _error_object(body)
    if isinstance(err, str):
        return clip_message(err, MAX_SERVER_MESSAGE_CHARS)
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return clip_message(str(err["message"]), MAX_SERVER_MESSAGE_CHARS)
    return clip_message(body[:200].decode("utf-8", "replace").strip(), MAX_SERVER_MESSAGE_CHARS)


# the longest wait a server's Retry-After is honoured for: a longer one (or a date far ahead)
# would leave completion off for longer than a user would wait without looking why
MAX_RETRY_AFTER_S = 60.0


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """The seconds a Retry-After header asks to wait (delay-seconds or an HTTP-date), at most
    MAX_RETRY_AFTER_S; None when there is none, it cannot be read, or it is past.

    >>> retry_after("5"), retry_after("600"), retry_after("soon")
    (5.0, 60.0, None)
    """
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds) or seconds <= 0:
        return None
    return min(seconds, MAX_RETRY_AFTER_S)


async def raise_for_status(name: str, response: httpx.Response | StreamResponse, url: str = "") -> None:
    """Raises the BackendError a status other than 200 means. `url`: the server's address as
    configured (a redirect's relative Location is read against it, and the message names it)."""
    if isinstance(response, httpx.Response):
        status = response.status_code
        if status == 200:
            return
    else:
        status = response.status
        if status == 200:
            return
    headers = response.headers
    if 300 <= status < 400:
        # followed nowhere: a completion request must not be sent on (a POST turned into a GET,
        # the prompt sent to another host); the user sets the address the server wants
        location = headers.get("location") or ""
        where = f"to {urljoin(url + '/', location)}" if location else "without saying where (no Location)"
        raise ServerError(f"{name}: the server at {url or '?'} redirected {where} (HTTP {status}); "
                          f"set backends.{name}.url to the final address (redirects are not followed)", status=status)
    body = await read_error_body(response)  # a bounded part (limits.py)
    message = error_message(body)
    wait = retry_after(headers.get("retry-after")) if status in (429, 503) else None
    if status == 503:
        raise ServerUnavailable(f"{name}: server not ready (503: {message or 'loading'})", retry_after=wait)
    err = _error_object(body)
    counted = err.get("n_prompt_tokens") if isinstance(err, dict) else None
    if status == 429 and not message:
        message = "too many requests"
    raise ServerError(f"{name}: HTTP {status}: {message or 'no reason given'}", status=status, retry_after=wait,
                      prompt_tokens=counted if isinstance(counted, int) and counted > 0 else None,
                      context_tokens=_context_tokens(err, message) if status == 400 else None)


# "maximum context length is 2048 tokens" (vLLM, OpenAI), "context size (4096 tokens)"
_CONTEXT_SIZE = re.compile(r"(?:maximum context length is|context size \()\s*(\d+)\s*tokens", re.IGNORECASE)


def _context_tokens(err: object, message: str) -> int | None:
    """How many tokens the server's context holds, as a context-overflow error says."""
    n = err.get("n_ctx") if isinstance(err, dict) else None  # llama.cpp's
    if isinstance(n, int) and n > 0:
        return n
    found = _CONTEXT_SIZE.search(message)
    return int(found.group(1)) if found else None
