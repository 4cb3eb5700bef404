"""The options of one backend entry (`backends.NAME` in setup()'s table) and of its managed
server (`backends.NAME.server`): the types every layer that talks to a model server takes.

A leaf: it imports nothing of the package, so the dialects, the transport, the servers and the
health checks can name these types without importing the whole configuration (config.py holds
the rest of the schema; backends/registry.py checks `kind` and fills a kind's default URL).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

__all__ = ["DEFAULT_KIND", "BackendConfig", "ServerOptions"]

PositiveInt = Annotated[int, Meta(gt=0)]
NonNegFloat = Annotated[float, Meta(ge=0)]


class ServerOptions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    # '' = derived from the backend: its kind's (llama.cpp, ollama, sglang, lmstudio), or the name
    # "vllm"; "none" = never start one; else a recipe's name (backends.registry.recipes(),
    # checked where the options are loaded)
    recipe: str = ""
    # what the server loads when it differs from `model` (the name requests carry): a .gguf path,
    # an HF directory or hub id; '' = `model`
    weights: str = ""
    # llama.cpp: a folder of .gguf models served by one router-mode llama-server
    # (`--models-dir`): each is loaded when a request names it (the entry's `model`)
    models_dir: str = ""
    # tokens one request may need (prompt + generation): the per-slot context of llama.cpp and
    # vLLM's --max-model-len (capped at the model's own limit)
    context_tokens: PositiveInt = 8192
    # llama.cpp slots (-np); None: llama-server's own count (servers/llama_cpp_recipe.py says why)
    parallel: PositiveInt | None = None
    # vLLM scheduler limits; one editor user needs few sequences, and each one reserves KV cache
    max_num_seqs: PositiveInt = 8
    max_num_batched_tokens: PositiveInt = 4096
    # vLLM --dtype ('' = the model's); "float32" for the tiny CPU test model
    dtype: str = ""
    # overrides the computed vLLM --gpu-memory-utilization (0 = compute it)
    gpu_memory_utilization: Annotated[float, Meta(ge=0, le=1)] = 0.0
    # python of a venv that has vLLM; starts `python -m vllm.entrypoints.openai.api_server`
    python: str = ""
    # a server the plugin started stops this long after the last Neovim using it exits
    keep_alive_s: NonNegFloat = 0.0
    # 0 = by recipe: llama.cpp 300 (the preset may download), vLLM 600, Ollama 60
    startup_timeout_s: NonNegFloat = 0.0
    env: dict[str, str] = {}
    extra_args: list[str] = []
    # crash handling: a server that dies within `quick_failure_s` of starting counts as a quick
    # failure; after `max_restarts` of them in a row the supervisor gives up with an error
    max_restarts: PositiveInt = 5
    restart_backoff_s: Annotated[float, Meta(gt=0)] = 1.0
    quick_failure_s: NonNegFloat = 60.0


# the kind of an entry that names none
DEFAULT_KIND = "llama.cpp"


class BackendConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One model server. `kind` names its record in backends/registry.py (the wire dialect,
    default URL, launch recipe); the name in `backends` is the user's."""

    kind: Annotated[str, Meta(description="the wire dialect (vLLM speaks 'openai')")] = DEFAULT_KIND
    url: str = "http://127.0.0.1:8012"  # a new entry without one gets its kind's default_url
    model: str = ""
    # '' = detect from the server's model name; otherwise a name from prompt.templates.names()
    fim_template: str = ""
    # llama.cpp only: 'completion' renders the prompt here with the typed text last (the
    # server's prompt cache keeps the rest while typing); 'infill' lets the server build it
    # from the model's own FIM tokens; 'auto' = completion when the template is configured or
    # the model's vocabulary has a known FIM form (one /tokenize call), else infill
    endpoint: Literal["auto", "completion", "infill"] = "auto"
    # how a request asks for the text at the cursor (prompt/styles.py): 'fim' (the model's FIM
    # tokens), 'continue' (a base model continues the text before the cursor), 'chat' (an
    # instruct model fills a marked hole); '' = decided from what the server tells of its model
    prompt: Literal["", "fim", "continue", "chat"] = ""
    # name of an environment variable holding a Bearer token; the key itself never sits in config
    api_key_env: Annotated[str, Meta(description="the environment variable holding the token")] = ""
    # https: a PEM bundle of CAs trusted beside the system's (a team server's own CA)
    ca_file: str = ""
    # https: false checks no certificate at all (checkhealth and doctor warn on every run)
    tls_verify: bool = True
    # launch command as an argv list (server management); empty = the built-in recipe
    cmd: Annotated[list[str], Meta(description="how to start the server (a managed backend)")] = []
    timeout_ms: PositiveInt = 10_000
    temperature: Annotated[float, Meta(ge=0)] = 0.1
    top_p: Annotated[float, Meta(gt=0, le=1)] = 0.9
    # llama.cpp sampler chain; "infill" ends a suggestion when the model is unsure (as llama.vim
    # does); "temperature" must be in the chain or the temperature option is ignored
    samplers: list[str] = msgspec.field(default_factory=lambda: ["top_k", "top_p", "temperature", "infill"])
    # how :LocalCopilotBackend starts and supervises this backend's server
    server: Annotated[ServerOptions, Meta(description="the managed server's own options")] = ServerOptions()
