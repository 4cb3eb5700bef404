"""A fake language server over stdio that says it finds definitions and hovers, and never
answers either: the slow language server no real one is on demand. It answers `initialize`
and `shutdown`, and writes each method it is asked to the file named by its first argument
(so a test knows the question was asked).

Run as `python silent_language_server.py LOG`.
"""

from __future__ import annotations

import json
import sys


def _read(stream) -> dict | None:  # type: ignore[no-untyped-def]
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(stream.read(length or 0))


def _write(stream, msg: dict) -> None:  # type: ignore[no-untyped-def]
    body = json.dumps(msg).encode()
    stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    stream.flush()


def main() -> None:
    log = open(sys.argv[1], "a", buffering=1)  # noqa: SIM115 - open for the server's life
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while (msg := _read(inp)) is not None:
        method = msg.get("method", "")
        log.write(method + "\n")
        if method == "initialize":
            _write(out, {"jsonrpc": "2.0", "id": msg["id"], "result": {"capabilities": {
                "textDocumentSync": 1, "definitionProvider": True, "hoverProvider": True}}})
        elif method == "shutdown":
            _write(out, {"jsonrpc": "2.0", "id": msg["id"], "result": None})
        elif method == "exit":
            return
        # everything else, textDocument/definition included, is never answered


if __name__ == "__main__":
    main()
