"""(h) The floors: the leanest Python loop that does a keystroke's I/O, and the leanest Neovim side.

No budget, a yardstick. A separate Python process does per key only what the host's first
part cannot skip, and nothing else: it wakes on a msgpack-RPC notification (one line changed,
as Lua sends while typing on a line), splices the line into the window it keeps, renders a
FIM prompt, POSTs it unstreamed to the tiny llama-server on a kept-alive connection (6 tokens,
as the first part asks), waits in a blocking recv(), decodes the JSON answer and writes one
nvim_exec_lua notification back. Keys come 90 ms apart, as in the bursts, so it runs from the
same cold caches as the host; its CPU per key is read the same way (scheduler's count).

What the host spends per key above this floor is its own code (the engine's general path:
cancellation, the window fit, caches, post-processing, statistics), not the machine or
Python itself: on the project's 2-core VM this loop costs ~0.25-0.37 ms per key, the host
~0.8-1.25 ms (the spread is the machine's load: read the ratio).

The same loop also serves the floor under Neovim's main thread (bench/run.py, (i)): LEAN_NVIM_LUA
is the least a Neovim side can do to show a suggestion per key. On TextChangedI it sends the
cursor's line (the window when the row changed) straight from the autocmd; the lean host answers
with one nvim_exec_lua that places an inline extmark; InsertCharPre takes the mark away before
the next character is drawn. No options, no state, no checks: what any design that draws a
suggestion for every key costs the editor's thread (the RPC message, the plan message, the
redraw of the line).
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import msgpack

import harness as H

KEYS_PER_BURST = 8
INTERVAL_S = 0.09
LINES_BEFORE, LINES_AFTER = 60, 20  # a prompt of ~2,700 tokens of the tiny model, the host's size

# The lean host: argv = socket fd, server host, server port[, the Lua that draws a plan].
# Blocking I/O, one thread.
_LEAN_HOST = r"""
import socket, sys
import msgpack, msgspec

class Answer(msgspec.Struct):
    content: str = ""
    tokens_evaluated: int = 0

chan = socket.socket(fileno=int(sys.argv[1]))
address = (sys.argv[2], int(sys.argv[3]))
draw = sys.argv[4] if len(sys.argv) > 4 else "require('local_copilot.ghost').show(...)"

def connect():
    s = socket.create_connection(address)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s

server = connect()
unpacker, encode = msgpack.Unpacker(), msgspec.msgpack.Encoder().encode
to_json, answer = msgspec.json.Encoder().encode, msgspec.json.Decoder(Answer).decode
head = b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
window = []

def post(body, retry=True):
    global server
    server.sendall(head + str(len(body)).encode() + b"\r\n\r\n" + body)
    data = b""
    while (end := data.find(b"\r\n\r\n")) < 0:
        more = server.recv(65536)
        if not more and retry and not data:  # llama-server ends a connection after 100 requests
            server.close()
            server = connect()
            return post(body, retry=False)
        data += more or sys.exit("the server closed the connection")
    i = data.lower().index(b"content-length:", 0, end) + 15
    size = int(data[i:data.index(b"\r\n", i)])
    while len(data) < end + 4 + size:
        data += server.recv(65536) or sys.exit("the server closed the connection")
    return data[end + 4:end + 4 + size]

while data := chan.recv(65536):
    unpacker.feed(data)
    for _, _, (name, snap) in unpacker:
        if "lines" in snap:
            window = snap["lines"]
        else:
            window[snap["row"] - snap["first"]] = snap["line"]
        row, col = snap["row"] - snap["first"], snap["col"]
        line = window[row]
        # the line's start after the middle marker, as the host renders it: typing appends
        # to the prompt, and the server's prompt cache keeps the rest
        prompt = ("<|fim_prefix|>" + "\n".join(window[:row]) + "\n<|fim_suffix|>" + line[col:] + "\n"
                  + "\n".join(window[row + 1:]) + "<|fim_middle|>" + line[:col])
        got = answer(post(to_json({"prompt": prompt, "n_predict": 6, "stream": False, "cache_prompt": True})))
        plan = {"seq": snap["seq"], "row": snap["row"], "col": col, "text": got.content.split("\n")[0],
                "prompt_tokens": got.tokens_evaluated}
        chan.sendall(encode([2, "nvim_exec_lua", [draw, [plan]]]))
"""


# The leanest Neovim side of per-key suggestions (see the docstring); LEAN.on switches it.
LEAN_NVIM_LUA = r"""
local api = vim.api
LEAN = { ns = api.nvim_create_namespace('lean_floor'), seq = 0, on = false, drawn = 0 }
function LEAN.show(plan)
  if plan.seq ~= LEAN.seq then return end
  LEAN.drawn = LEAN.drawn + 1
  api.nvim_buf_set_extmark(0, LEAN.ns, plan.row, plan.col,
    { id = 1, virt_text = { { plan.text, 'Comment' } }, virt_text_pos = 'inline' })
end
api.nvim_create_autocmd('InsertCharPre', { callback = function()
  if LEAN.on then pcall(api.nvim_buf_del_extmark, 0, LEAN.ns, 1) end
end })
api.nvim_create_autocmd('TextChangedI', { callback = function()
  if not LEAN.on then return end
  local row, col = unpack(api.nvim_win_get_cursor(0))
  row = row - 1
  LEAN.seq = LEAN.seq + 1
  local snap = { row = row, col = col, seq = LEAN.seq }
  if row == LEAN.row then
    snap.first, snap.line = LEAN.first, api.nvim_buf_get_lines(0, row, row + 1, true)[1]
  else
    snap.first = math.max(0, row - %d)
    snap.lines = api.nvim_buf_get_lines(0, snap.first, row + 1 + %d, false)
    LEAN.row, LEAN.first = row, snap.first
  end
  vim.rpcnotify(LEAN.chan, 'local_copilot_event', 'snapshot', snap)
end })
""" % (LINES_BEFORE, LINES_AFTER)


def _spawn_lean_host(fd: int, server_url: str, draw: str | None = None) -> subprocess.Popen[bytes]:
    """The lean host on socket `fd`, asking the server at `server_url`; `draw`: the Lua that
    draws a plan, when not ghost.show."""
    host, port = server_url.split("//", 1)[1].rsplit(":", 1)
    argv = [sys.executable, "-c", _LEAN_HOST, str(fd), host, port] + ([draw] if draw else [])
    return subprocess.Popen(argv, pass_fds=[fd])


class LeanNvimSide:
    """LEAN_NVIM_LUA in `nvim`, connected to a lean host that asks the server at `server_url`.
    Off until the caller sets LEAN.on; close() stops the host."""

    def __init__(self, nvim: Any, server_url: str, workdir: Any) -> None:
        path = str(workdir / "lean.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        try:
            nvim.exec_lua(LEAN_NVIM_LUA)
            # connect() completes on the backlog; the host takes the accepted end
            nvim.exec_lua("LEAN.chan = vim.fn.sockconnect('pipe', ..., { rpc = true })", path)
            conn, _ = listener.accept()
        finally:
            listener.close()
        self.proc = _spawn_lean_host(conn.fileno(), server_url, "LEAN.show(...)")
        conn.close()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def lean_host_ms_per_key(server_url: str, lines: list[str], bursts: int = 12) -> dict[str, Any]:
    """CPU of the lean host per key over `bursts` typing bursts (8 keys, 90 ms apart), each on a
    line of its own in the middle of `lines`; the median burst is the number."""
    mine, theirs = socket.socketpair()
    proc = _spawn_lean_host(theirs.fileno(), server_url)
    theirs.close()
    unpacker = msgpack.Unpacker()
    seq = 0

    def key(snap: dict[str, Any]) -> dict[str, Any]:
        nonlocal seq
        seq += 1
        mine.sendall(msgpack.packb([2, "local_copilot_event", ["snapshot", {**snap, "seq": seq}]]))
        while True:  # its answer, before the next key (the server answers in a few ms)
            for msg in unpacker:
                return msg[2][1][0]
            data = mine.recv(65536)
            if not data:
                raise RuntimeError(f"the lean host exited ({proc.wait()})")
            unpacker.feed(data)

    try:
        row = len(lines) // 2
        first = row - LINES_BEFORE
        window = list(lines[first:row + LINES_AFTER])
        window[row - first] = ""
        plan = key({"row": row, "first": first, "col": 0, "lines": window})
        prompt_tokens = plan["prompt_tokens"]
        per_key = []
        for b in range(bursts + 1):  # the first burst warms up
            text = ""
            cpu0 = H.proc_cpu_s(proc.pid)
            for ch in "xxxxxxxx"[:KEYS_PER_BURST]:
                t0 = time.monotonic()
                text += ch
                key({"row": row, "first": first, "col": len(text), "line": text})
                time.sleep(max(0.0, INTERVAL_S - (time.monotonic() - t0)))
            if b:
                per_key.append((H.proc_cpu_s(proc.pid) - cpu0) * 1000 / KEYS_PER_BURST)
    finally:
        mine.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    return {"host_cpu_ms_per_key": statistics.median(per_key), "bursts": bursts,
            "prompt_tokens": prompt_tokens, "spread_ms": [round(min(per_key), 3), round(max(per_key), 3)]}


if __name__ == "__main__":
    import tempfile
    from pathlib import Path

    from run import sample_source

    with tempfile.TemporaryDirectory(prefix="lc-floor-") as tmp, H.tiny_server(Path(tmp)) as server:
        print(lean_host_ms_per_key(server.url, sample_source(400)))
