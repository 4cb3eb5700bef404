"""JSON-RPC in front of pygls: every request a client sends is answered, whatever its shape.

pygls drops what it cannot read with a line in its log, and the client waits forever: a body
that is not JSON, a message without `jsonrpc` or without `method`, params that do not fit the
method (a negative position, a line past 2^31, no `position`, an inline completion without
`context`, `params` as a list), and every request after `shutdown`; its `exit` ends the
process with 0 whether or not `shutdown` came. This layer reads the frames itself and answers
as JSON-RPC 2.0 and the LSP specification say:

- a body that is not JSON (or not UTF-8): -32700 ParseError, id null;
- a message that is no request, notification or response: -32600 InvalidRequest (id null
  where the message has no usable id);
- params that do not fit the method: -32602 InvalidParams, saying what is wrong where;
- a request before `initialize`: -32002 ServerNotInitialized; after `shutdown`: -32600
  (notifications then are dropped, as the specification says);
- `exit`, or the end of the input, ends the server: exit code 0 after `shutdown`, 1 without.

A notification whose params do not fit is dropped and said in the client's log. What passes
goes to pygls, which answers the rest (an unknown method: -32601; a handler that fails:
-32603), except the notifications given as `own`: the document notifications, which the
server applies itself (documents.py).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any, BinaryIO

import cattrs
import cattrs.v
from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.io_ import StdinAsyncReader, StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage

from ..log import log

__all__ = ["Rpc"]

_LENGTH = re.compile(rb"content-length\s*:\s*(\d+)", re.IGNORECASE)
_ERR = types.ErrorCodes


def _is_id(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _shape(data: Any) -> tuple[str, str]:
    """What `data` is: 'request', 'notification', 'response', or 'invalid' with why."""
    if not isinstance(data, dict):
        return "invalid", "a batch (a JSON array) is not taken" if isinstance(data, list) else "a message is a JSON object"
    if data.get("jsonrpc") != "2.0":
        return "invalid", 'a message has "jsonrpc": "2.0"'
    if "id" in data and not _is_id(data["id"]):
        return "invalid", "an id is an integer or a string"
    if "method" not in data:
        if "id" in data and ("result" in data or "error" in data):
            return "response", ""
        return "invalid", "a request or notification has a method"
    if not isinstance(data["method"], str):
        return "invalid", "a method is a string"
    if data.get("params") is not None and not isinstance(data["params"], (dict, list)):
        return "invalid", "params are an object or an array"
    return ("request" if "id" in data else "notification"), ""


def _format(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, ValueError) and str(exc):
        return str(exc)  # lsprotocol's validators say the range: "Position.line should be in range ..."
    return cattrs.v.format_exception(exc, type_)


def _problems(exc: Exception) -> str:
    if isinstance(exc, cattrs.ClassValidationError):
        return "; ".join(cattrs.transform_error(exc, format_exception=_format))
    return str(exc) or type(exc).__name__


async def _read_frame(reader: StdinAsyncReader) -> bytes | None:
    """The next message's body (after headers and the blank line that ends them); None at the
    end of the input."""
    length: int | None = None
    headers = False
    while True:
        line = await reader.readline()
        if not line:
            return None
        if line.strip():
            headers = True
            m = _LENGTH.fullmatch(line.strip())
            if m:
                length = int(m.group(1))
            continue
        if length is not None:
            break
        if headers:  # a header block without a length: no body can be told from the next headers
            log.warning("a message without Content-Length: skipped")
            headers = False
    body = await reader.readexactly(length)
    return body if len(body) == length else None


class Rpc:
    """The message loop of `ls` on stdio."""

    def __init__(self, ls: LanguageServer, own: dict[str, Callable[[Any], None]]) -> None:
        self.ls = ls
        self.own = own  # notifications applied here, not by pygls: method -> handler(params)
        self.initialized = False
        self.shut_down = False
        self._converter = get_converter()  # lsprotocol's, as pygls structures (without its tracebacks)
        self._writer: StdoutWriter | None = None

    def serve(self, stdin: BinaryIO, stdout: BinaryIO) -> int:
        """Answer on `stdin`/`stdout` until exit or the end of the input; the exit code."""
        self._writer = StdoutWriter(stdout)
        self.ls.protocol.set_writer(self._writer)
        try:
            return asyncio.run(self._run(StdinAsyncReader(stdin, self.ls.thread_pool)))
        except BrokenPipeError:
            log.info("the client closed the connection")
            return self._exit_code()
        finally:
            self.ls.thread_pool.shutdown(wait=False, cancel_futures=True)  # the reader's

    async def _run(self, reader: StdinAsyncReader) -> int:
        while True:
            body = await _read_frame(reader)
            if body is None:
                return self._exit_code()
            code = self.take(body)
            if code is not None:
                return code

    def _exit_code(self) -> int:
        return 0 if self.shut_down else 1

    def take(self, body: bytes) -> int | None:
        """Handle one message; the exit code once the server is to end."""
        try:
            data = json.loads(body)
        except ValueError as exc:  # not JSON, or not UTF-8
            self._error(None, _ERR.ParseError, f"the message is not JSON: {exc}")
            return None
        kind, why = _shape(data)
        msg_id = data.get("id") if isinstance(data, dict) and _is_id(data.get("id")) else None
        if kind == "invalid":
            self._error(msg_id, _ERR.InvalidRequest, f"invalid message: {why}")
            return None
        if kind == "response":  # the client's answer to a request of the server's
            self._hand_on(data, None, None)
            return None
        method: str = data["method"]
        request = kind == "request"
        if method == types.EXIT:
            return self._exit_code()
        if self.shut_down:
            if request:
                self._error(msg_id, _ERR.InvalidRequest, f"{method}: the server is shut down (only exit is taken)")
            return None
        if not self.initialized and not (request and method == types.INITIALIZE):
            if request:
                self._error(msg_id, _ERR.ServerNotInitialized, f"{method}: the server is not initialized yet")
            return None
        if request and method == types.INITIALIZE and self.initialized:
            self._error(msg_id, _ERR.InvalidRequest, "initialize: the server is initialized already")
            return None
        kind_type = self.ls.protocol.get_message_type(method)
        if kind_type is None:  # a method lsprotocol does not know: pygls's generic message
            kind_type = JsonRPCRequestMessage if request else JsonRPCNotification
            data.setdefault("params", None)
        try:
            message = self._converter.structure(data, kind_type)
        except Exception as exc:
            why = f"{method}: invalid params: {_problems(exc)}"
            if request:
                self._error(msg_id, _ERR.InvalidParams, why)
            else:
                log.warning("dropped a notification: %s", why)
                self.ls.window_log_message(types.LogMessageParams(
                    type=types.MessageType.Warning, message=f"local-copilot: dropped {why}"))
            return None
        if request and method == types.INITIALIZE:
            self.initialized = True
        elif request and method == types.SHUTDOWN:
            self.shut_down = True
        own = None if request else self.own.get(method)
        if own is not None:
            try:
                own(message.params)
            except Exception:
                log.exception("%s failed", method)
            return None
        self._hand_on(data, message, msg_id if request else None)
        return None

    def _hand_on(self, data: dict[str, Any], message: Any, msg_id: Any) -> None:
        """To pygls, which answers a request it takes (the result, or its own error)."""
        try:
            self.ls.protocol.handle_message(message if message is not None else
                                            self.ls.protocol.structure_message(data))
        except Exception as exc:
            log.warning("could not handle %s: %s", data.get("method") or "a response", exc)
            if msg_id is not None:
                self._error(msg_id, _ERR.InternalError, f"{data.get('method')}: {exc}")

    def _error(self, msg_id: Any, code: int, message: str) -> None:
        log.info("answered %s with %s: %s", msg_id, int(code), message)
        body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": {"code": int(code), "message": message}}).encode()
        assert self._writer is not None
        self._writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
