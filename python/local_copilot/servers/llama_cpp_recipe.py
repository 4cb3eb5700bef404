"""llama-server's launch recipe: the one way llama-server is launched. The supervisor runs it
for users (servers/recipes.py `build_recipe`), and the tests, the bench and the demo run it in
the foreground (servers/llama_cpp.py `LlamaServer.for_model`), adding the flags they need
through the same `ServerOptions`."""

from __future__ import annotations

import math
from pathlib import Path

from ..backends.launch import Recipe, keep_loopback
from ..errors import ServerStartError
from ..server_options import ServerOptions
from .programs import server_command
from .readiness import STARTUP_TIMEOUTS, ready_path

__all__ = ["DEFAULT_PRESET", "LLAMA_BATCH", "llama_cpp_argv", "llama_cpp_recipe", "llama_slots", "models_dir_problem"]

# the FIM preset used when no model is configured (downloads Qwen2.5-Coder-1.5B Q8_0, ~1.6 GB)
DEFAULT_PRESET = "--fim-qwen-1.5b-default"
LLAMA_BATCH = 1024  # the FIM presets' -b/-ub


def llama_slots(context_tokens: int, parallel: int | None, batch: int = LLAMA_BATCH) -> tuple[int, int | None]:
    """(tokens per slot, slots; None: llama-server's own count). With an explicit -np,
    llama-server splits -c evenly across slots, and a slot only keeps `n_ctx_slot - batch`
    tokens of repo context (input_extra): at n_ctx_slot == batch it drops all of it. So each
    slot gets at least the configured context and at least 4x the batch, rounded up to
    llama.cpp's 256-token padding. With its own count the slots share one KV cache of -c
    tokens, each of them able to use all of it."""
    per_slot = max(context_tokens, 4 * batch)
    per_slot = math.ceil(per_slot / 256) * 256
    return per_slot, None if parallel is None else max(1, parallel)


def llama_model_args(weights: str) -> list[str]:
    if not weights:
        return [DEFAULT_PRESET]
    if weights.endswith(".gguf") or Path(weights).expanduser().is_file():
        return ["-m", str(Path(weights).expanduser())]
    if weights.count("/") == 1 and not weights.startswith((".", "/", "~")):
        return ["-hf", weights]  # owner/repo[:quant] on Hugging Face
    return ["-m", weights]


def models_dir_problem(path: str) -> str | None:
    """What keeps a router-mode llama-server from serving the models in `path`, or None. The
    router finds a model file at the folder's top, or a model's files in a folder of its own
    (several shards, or a model and its mmproj)."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return f"{folder} is not a folder" if folder.exists() else f"{folder} does not exist"
    if next(folder.glob("*.gguf"), None) is None and next(folder.glob("*/*.gguf"), None) is None:
        return f"{folder} holds no .gguf model (at its top, or in a folder of one model's files)"
    return None


def llama_cpp_argv(binary: str, *, port: int, weights: str, context_tokens: int, parallel: int | None,
                   extra: list[str] | tuple[str, ...] = (), models_dir: str = "") -> list[str]:
    per_slot, slots = llama_slots(context_tokens, parallel)
    # the preset goes first: flags after it override its port and -c 0.
    # --cache-reuse: lines dropped from the start of a cached prompt (the cursor moved down) are
    # shifted out of the slot's KV cache instead of everything after them being evaluated again
    # (llama.cpp's server README, `--cache-reuse`); the plugin's requests ask for shorter chunks
    # themselves (backends/llama_cpp.py CACHE_REUSE_TOKENS), this serves other clients too.
    # --metrics: the bench and checkhealth read the server's token counters.
    # No -np unless asked: llama-server's own slots (4 sharing one KV cache in current
    # llama.cpp) keep an instruction edit's or a next edit's prompt cached beside ghost text's,
    # and ghost text names its buffer's slot (backends/slots.py), so a superseded request no
    # longer needs a slot of its own to wind down in. An explicit -np splits -c evenly: -c is
    # then slots x the per-slot context, so each slot keeps the whole configured context.
    # With a models folder the server is a router: no model of its own, and each model it
    # loads runs in a child llama-server that inherits the rest of these flags.
    models = ["--models-dir", str(Path(models_dir).expanduser())] if models_dir else llama_model_args(weights)
    return [
        *server_command(binary), *models,
        "--host", "127.0.0.1", "--port", str(port),
        "-c", str(per_slot * (slots or 1)), *(["-np", str(slots)] if slots else []),
        "-b", str(LLAMA_BATCH), "-ub", str(LLAMA_BATCH),
        "--cache-reuse", "256", "--metrics", "--no-webui",
        *extra,
    ]


def llama_cpp_recipe(name: str, *, binary: str, port: int, weights: str, opts: ServerOptions,
                     model: str = "") -> Recipe:
    """llama-server serving `weights` (a .gguf path, an HF `owner/repo[:quant]`, '' = the FIM
    preset) on 127.0.0.1:`port`, sized and tuned by `opts` (backends.NAME.server)."""
    extra, bind_notes = keep_loopback(name, opts.extra_args)
    if opts.models_dir:
        problem = models_dir_problem(opts.models_dir)
        if problem is not None:
            raise ServerStartError(f"{name}: backends.{name}.server.models_dir: {problem}; give a folder of .gguf "
                                   "files (llama-server --models-dir)")
    argv = llama_cpp_argv(binary, port=port, weights=weights, context_tokens=opts.context_tokens,
                          parallel=opts.parallel, extra=extra, models_dir=opts.models_dir)
    per_slot, slots = llama_slots(opts.context_tokens, opts.parallel)
    notes = [*bind_notes, f"{slots} slot(s) of {per_slot} tokens each (-c {per_slot * slots} -np {slots})" if slots
             else f"llama-server's own slots, sharing one KV cache of {per_slot} tokens (-c {per_slot})"]
    if opts.models_dir:
        notes.append(f"router mode: the models in {opts.models_dir}, each loaded when a request names it"
                     + ("" if model else f" (set backends.{name}.model to one of them)"))
    elif not weights:
        notes.append(f"no model configured: {DEFAULT_PRESET} (downloads Qwen2.5-Coder-1.5B Q8_0 on first "
                     f"start; set backends.{name}.model to a .gguf path to use your own)")
    return Recipe(backend=name, kind="llama.cpp", argv=argv, env=dict(opts.env), port=port,
                  url=f"http://127.0.0.1:{port}", health_path=ready_path("llama.cpp", "llama.cpp"),
                  startup_timeout_s=opts.startup_timeout_s or STARTUP_TIMEOUTS["llama.cpp"], model=model, notes=notes)
