"""Launch recipes: how to start llama-server, vLLM and Ollama for FIM, as argv lists; a kind
may bring its own (backends/registry.py `Kind.launch`: SGLang, LM Studio).

`build_recipe()` is pure: it turns a backend's config, its `ServerOptions` and the facts found on
this machine (`HostFacts`: where the programs are (servers/programs.py), the GPUs, the model's
config.json) into a `Recipe`: llama-server's (servers/llama_cpp_recipe.py), vLLM's
(servers/vllm_recipe.py), Ollama's, or the user's own. `probe_host()` gathers those facts;
`make_recipe()` does both. A user `cmd` replaces the built-in argv verbatim (the URL still
decides port and health checks). Where a started server says it is ready is the backend
registry's (servers/readiness.py `ready_path()`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
import msgspec

from ..backends.launch import LOOPBACK, Recipe
from ..errors import ServerStartError
from ..server_options import ServerOptions
from .host_facts import HostFacts
from .llama_cpp_recipe import llama_cpp_recipe
from .memory import find_model_dir, query_gpus, weights_bytes
from .programs import INSTALL_HINTS, find_llama_server, find_vllm
from .readiness import STARTUP_TIMEOUTS, ready_path
from .vllm_recipe import vllm_recipe

__all__ = [
    "Recipe",
    "recipe_kind",
    "local_port",
    "build_recipe",
    "probe_host",
    "make_recipe",
    "check_ollama_model",
]

# servers/recipes.py's own; a kind's `launch` adds its name (registry.recipes())
RecipeKind = Literal["llama.cpp", "vllm", "ollama", "custom"]


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
        r = vllm_recipe(name, cfg, opts, facts, port)
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
