"""A scripted editing session, run twice: with suggestion reuse (typed-through trimming and
the cache) and without. Prints requests sent and server tokens generated/evaluated.

    python bench/session.py

Session, against the real tiny llama-server (the phrase model, which always suggests
"run(a, b)\\n\\tok") in a headless Neovim: type a line, type through the suggestion,
backspace twice, retype, accept. Keys are paced like a person (90 ms apart).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import make_manifest, metrics, nvim_binary, nvim_env, start_nvim, wait_for  # noqa: E402
from local_copilot.devtools.tiny_model import write_gguf  # noqa: E402
from local_copilot.servers.llama_cpp import LlamaServer  # noqa: E402
from tests.launch import suite_options  # noqa: E402

PHRASE = "run(a, b)\n\tok"
KEY_GAP = 0.09


def type_keys(nvim, keys: list[str]) -> None:
    for key in keys:
        nvim.input(key)
        time.sleep(KEY_GAP)  # pacing of a person typing, not a wait for a condition


def suggestion(nvim) -> str:
    return nvim.exec_lua("return require('local_copilot.ghost').text()") or ""


def run(reuse: bool, server: LlamaServer, nvim_bin: str, manifest: Path, work: Path) -> dict[str, float]:
    env = nvim_env(work, manifest)
    nvim = start_nvim(nvim_bin, manifest, env, {
        # /infill, as the tests ask the phrase model: it writes PHRASE after the FIM middle token, and
        # through /completion's template the prompt ends with the line's tab instead ("ok" only)
        "backends": {"llama.cpp": {"url": server.url, "endpoint": "infill"}}, "reuse": reuse, "speculative": False,
    })
    try:
        nvim.command(f"edit {work / 'session.py'}")
        nvim.current.buffer[:] = ["def f():", "\t"]
        nvim.command("setlocal noexpandtab softtabstop=0")  # the model indents with tabs
        nvim.command("call cursor(2, 1)")
        nvim.input("A")
        wait_for(lambda: suggestion(nvim) == PHRASE, what="first suggestion")
        before = metrics(server.url)
        t0 = time.monotonic()
        type_keys(nvim, list("x = 1") + ["<CR>"])  # a line of one's own (autoindent adds the tab)
        wait_for(lambda: suggestion(nvim) == PHRASE, what="suggestion on the new line")
        type_keys(nvim, list("run("))  # type through the suggestion
        type_keys(nvim, ["<BS>", "<BS>"])  # backspace ...
        type_keys(nvim, list("n("))  # ... and retype
        # with reuse the rest of the suggestion ("a, b)...") is back; without it the toy model
        # suggests its phrase anew at every spot
        wait_for(lambda: suggestion(nvim), what="a suggestion after retyping")
        lines = len(nvim.current.buffer)
        nvim.exec_lua("require('local_copilot').accept()")
        wait_for(lambda: len(nvim.current.buffer) > lines, what="accepted")
        final = nvim.current.buffer[:]
        after = metrics(server.url)
        counters = nvim.call("LocalCopilotCall", "status")["stats"]["counters"]
        return {
            "reuse": reuse,
            "requests": counters.get("requests", 0) - 1,  # the first suggestion is not part of the session
            "typed_through": counters.get("typed_through", 0),
            "cache_hits": counters.get("cache_hits", 0),
            "cancels": counters.get("cancels", 0),
            "tokens_generated": after["llamacpp:tokens_predicted_total"] - before["llamacpp:tokens_predicted_total"],
            "prompt_tokens": after["llamacpp:prompt_tokens_total"] - before["llamacpp:prompt_tokens_total"],
            "seconds": round(time.monotonic() - t0, 2),
            "buffer": final,
        }
    finally:
        nvim.close()


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="lc-session-"))
    nvim_bin = nvim_binary()
    manifest = make_manifest(nvim_bin, work)
    model = write_gguf(work / "phrase.gguf", phrase=PHRASE)
    rows = []
    # the suite's options (tests/launch.py): one slot, whose cache hits and tokens the table counts
    with LlamaServer.for_model(model, log_file=work / "server.log", options=suite_options()) as server:
        for reuse in (True, False):
            rows.append(run(reuse, server, nvim_bin, manifest, work))
    print(f"{'reuse':<6} {'requests':>8} {'cancels':>7} {'typed-through':>13} {'cache hits':>10} {'tokens gen':>10} "
          f"{'prompt tok':>10}   buffer after the accept")
    for r in rows:
        print(f"{str(r['reuse']):<6} {r['requests']:>8} {r['cancels']:>7} {r['typed_through']:>13} {r['cache_hits']:>10} "
              f"{r['tokens_generated']:>10.0f} {r['prompt_tokens']:>10.0f}   {r['buffer'][2:]}")
    out = Path(__file__).resolve().parent / "results" / "session.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
