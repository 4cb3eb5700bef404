"""What the served model's make-up means for ghost text, as checkhealth and `doctor` say it:

- a hybrid or recurrent architecture (Mamba, RWKV, Jamba, Qwen3-Next, Qwen3.5, ...), for
  which llama-server cannot reuse chunks of a cached prompt (its log: "cache reuse is not
  supported"; ggml-org/llama.cpp#18497): a key after an edit above the cursor, or after the
  window moved, evaluates the prompt again from the change on, up to all of it;
- an Ollama model whose template has no suffix slot (`.Suffix`): Ollama drops a request's
  `suffix` for it, so the plugin renders the FIM prompt itself and sends it raw, or, with no
  FIM format known, writes without the text after the cursor.

The architecture comes from the server: llama-server's `/props` names the model file
(`model_path`), whose GGUF header says `general.architecture` when the file is on this
machine; else the names the server gives (`model_alias`, the file name). Ollama's
`/api/show` says it in `model_info["general.architecture"]`.
"""

from __future__ import annotations

import re
import struct
import time
from pathlib import Path
from typing import Any

import msgspec

from .checks import Item

__all__ = ["NO_CHUNK_REUSE", "architecture_by_name", "gguf_architecture", "llama_server_items", "ollama_items"]

# llama.cpp's architectures whose memory is recurrent, or hybrid (recurrent layers beside
# attention): their cache cannot drop or shift tokens, so --cache-reuse is off for them
# (llama-arch.cpp: llm_arch_is_recurrent, llm_arch_is_hybrid)
NO_CHUNK_REUSE = frozenset({
    "mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7", "jamba", "falcon-h1", "plamo2", "granitehybrid",
    "lfm2", "lfm2moe", "nemotron_h", "nemotron_h_moe", "qwen3next", "qwen35", "qwen35moe", "kimi-linear",
})

# model names that say such an architecture, for a server whose model file is elsewhere
_NAMES = (
    (re.compile(r"qwen3[._-]?(coder[._-]?)?next", re.I), "qwen3next"),
    (re.compile(r"qwen3[._-]?[56](?![\d])", re.I), "qwen35"),
    (re.compile(r"mamba", re.I), "mamba"),
    (re.compile(r"rwkv", re.I), "rwkv7"),
    (re.compile(r"jamba", re.I), "jamba"),
    (re.compile(r"falcon[._-]?h1", re.I), "falcon-h1"),
    (re.compile(r"granite[._-]?4(\.\d)?[._-]?(h|tiny|small|micro)(?![a-z])|granite.*hybrid", re.I), "granitehybrid"),
    (re.compile(r"lfm2", re.I), "lfm2"),
    (re.compile(r"nemotron[._-]?h(?![a-z])|nemotron[._-]?nano[._-]?(9b|12b)[._-]?v2", re.I), "nemotron_h"),
)

# what one measurement of the cost evaluates: code-like lines, ~1,000 tokens
_COST_PROMPT = "".join(f"def step_{i}(value):\n    return value * {i} + {i * 7}\n\n" for i in range(60))

_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def gguf_architecture(path: str | Path) -> str | None:
    """`general.architecture` from a GGUF file's header (the first keys, where llama.cpp's
    writers put it), or None when the file is not there or not GGUF."""
    try:
        with open(Path(path).expanduser(), "rb") as f:
            head = f.read(24)
            if len(head) < 24 or head[:4] != b"GGUF" or struct.unpack("<I", head[4:8])[0] < 2:
                return None
            (n_kv,) = struct.unpack("<Q", head[16:24])
            for _ in range(min(n_kv, 64)):
                (klen,) = struct.unpack("<Q", f.read(8))
                if klen > 1024:
                    return None
                key = f.read(klen).decode("utf-8", "replace")
                (vtype,) = struct.unpack("<I", f.read(4))
                if vtype == _GGUF_STRING:
                    (vlen,) = struct.unpack("<Q", f.read(8))
                    if key == "general.architecture":
                        return f.read(min(vlen, 256)).decode("utf-8", "replace")
                    f.seek(vlen, 1)
                elif vtype in _GGUF_SIZES:
                    f.seek(_GGUF_SIZES[vtype], 1)
                else:  # an array (the tokenizer's): the header's general keys came before it
                    return None
    except (OSError, struct.error, ValueError):
        return None
    return None


def architecture_by_name(*names: str) -> str | None:
    """The hybrid or recurrent architecture a model's name says, or None."""
    for name in names:
        for pattern, arch in _NAMES:
            if name and pattern.search(name):
                return arch
    return None


class _Timings(msgspec.Struct, frozen=True):
    prompt_n: int = 0
    prompt_ms: float = 0.0


class _Evaluated(msgspec.Struct):
    timings: _Timings = _Timings()


_evaluated = msgspec.json.Decoder(_Evaluated)


async def _prompt_cost(backend: Any) -> tuple[int, float] | None:
    """(tokens, ms) of evaluating a ~1,000-token prompt from nothing on this server."""
    body = {"prompt": _COST_PROMPT, "n_predict": 0, "cache_prompt": False, "temperature": 0.0,
            **({"model": backend.cfg.model} if backend.cfg.model else {})}
    started = time.perf_counter()
    try:
        done = await backend.fetch("POST", backend.props.via + "/completion", _evaluated, json=body, timeout_s=30.0)
    except Exception:  # noqa: BLE001 - the check says what it knows without the cost
        return None
    ms = done.timings.prompt_ms or (time.perf_counter() - started) * 1000
    return (done.timings.prompt_n, ms) if done.timings.prompt_n else None


def _no_reuse_item(arch: str, source: str, cost: tuple[int, float] | None) -> Item:
    per_key = ""
    if cost is not None:
        tokens, ms = cost
        per_key = (f"; here {tokens:,} prompt tokens take {ms:,.0f} ms, so such a key waits about "
                   f"{ms / tokens * 1000:,.0f} ms per 1,000 tokens of prompt after the change")
    return Item(
        level="warn",
        message=(f"the model's architecture is {arch} ({source}), a hybrid or recurrent one: llama-server cannot "
                 "reuse chunks of a cached prompt for it (\"cache reuse is not supported\", ggml-org/llama.cpp#18497). "
                 "Typing at the end of the prompt stays cheap, but a key after an edit above the cursor, or after "
                 "the window moved down, evaluates the prompt again from that change on, up to all of it" + per_key),
        advice=["for ghost text use a transformer FIM model, e.g. Qwen2.5-Coder 1.5B or 7B "
                "(llama-server --fim-qwen-1.5b-default, or --fim-qwen-7b-default)",
                "or keep this model and fewer context lines (context.lines_before) to shorten what is evaluated again"])


async def llama_server_items(backend: Any) -> list[Item]:
    """The architecture of the model a llama-server serves (`backend`: its dialect, probed),
    and what it costs where the server cannot reuse prompt chunks."""
    props = getattr(backend, "props", None)
    if props is None:
        return []
    path, alias = props.model_path or "", props.model_alias or ""
    arch = gguf_architecture(path) if path else None
    if arch is not None:
        source = "from the GGUF header of the model file /props names"
    else:
        arch = architecture_by_name(alias, Path(path).name if path else "")
        source = "from the model's name; its file is not on this machine" if arch else ""
    if arch is None:
        return []
    if arch not in NO_CHUNK_REUSE:
        return [Item(level="info", message=f"model architecture: {arch} ({source}); llama-server reuses chunks of "
                                           "cached prompts for it (--cache-reuse)")]
    return [_no_reuse_item(arch, source, await _prompt_cost(backend))]


class _Show(msgspec.Struct):
    template: str = ""
    model_info: dict[str, Any] = {}


_show = msgspec.json.Decoder(_Show)


async def ollama_items(backend: Any) -> list[Item]:
    """An Ollama model's template without a suffix slot, and its architecture (`backend`: its
    dialect, probed)."""
    if not backend.cfg.model:
        return []
    try:
        show = await backend.fetch("POST", "/api/show", _show, json={"model": backend.cfg.model}, timeout_s=10.0)
    except Exception:  # noqa: BLE001 - the model section already said why the server does not answer
        return []
    items: list[Item] = []
    arch = str(show.model_info.get("general.architecture") or "")
    if arch in NO_CHUNK_REUSE:
        items.append(Item(level="warn", message=(
            f"the model's architecture is {arch} (Ollama's /api/show), a hybrid or recurrent one: its cached prompt "
            "cannot be reused in chunks, so a key after an edit above the cursor evaluates the prompt again from "
            "that change on"), advice=["for ghost text use a transformer FIM model, e.g. qwen2.5-coder:1.5b-base"]))
    if ".Suffix" not in show.template:
        template = getattr(backend, "template", None)
        style = getattr(backend, "style", "fim")
        if style == "fim" and template is not None:
            items.append(Item(level="warn", message=(
                f"the model's Ollama template has no suffix slot (.Suffix): Ollama drops a request's suffix (the "
                f"text after the cursor) for it, so the plugin renders the {template.name} FIM prompt itself and "
                "sends it raw")))
        elif style == "continue":  # (the chat style puts the text after the cursor in its message)
            items.append(Item(level="warn", message=(
                "the model's Ollama template has no suffix slot (.Suffix) and its name names no FIM format: the "
                "text after the cursor is not used (prompt style continue)"),
                advice=[f"set backends[{backend.name!r}].fim_template to the model's FIM format (e.g. 'qwen'), so the "
                        "plugin sends the prompt raw with it",
                        "or use a model with fill-in-the-middle, e.g. qwen2.5-coder:1.5b-base"]))
    return items
