"""The chat prompt style's wire: ghost text asked of an instruct model's chat endpoint.

OpenAI-compatible servers (llama-server, vLLM, LM Studio, SGLang, ...) answer
`/v1/chat/completions` with SSE events ending with `data: [DONE]`, or one JSON document when
not streamed (a warm-up); Ollama answers `/api/chat` with NDJSON ending with `done: true`.
The conversation is prompt/styles.py's; the answer's wrappers are cut by chat_answer.py in
the post-processor. Thinking is turned off where the server takes the switch
(`chat_template_kwargs.enable_thinking` on llama-server and vLLM, `think` on an Ollama
model that thinks); a think block that comes anyway is dropped from the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from ..errors import ProtocolError
from ..prompt.styles import chat_messages
from ..transport.limits import server_words
from .base import Chunk, FimRequest

__all__ = ["chat_body", "chat_event_decoder", "ollama_chat_body", "ollama_event_decoder", "read_ollama_chat",
           "read_openai_chat"]


class _Delta(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    index: int = 0
    delta: _Delta | None = None
    message: _Delta | None = None  # an unstreamed answer's
    finish_reason: str | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _ChatEvent(msgspec.Struct):
    choices: list[_Choice] = []
    usage: _Usage | None = None
    timings: dict[str, float] | None = None  # llama-server's counters
    error: Any = None


class _OllamaMessage(msgspec.Struct):
    content: str = ""


class _OllamaEvent(msgspec.Struct):
    message: _OllamaMessage = msgspec.field(default_factory=_OllamaMessage)
    done: bool = False
    done_reason: str | None = None
    error: Any = None
    prompt_eval_count: int = 0
    eval_count: int = 0
    prompt_eval_duration: int = 0
    eval_duration: int = 0


# the chat events of both wires, read here and by instruction edits (chat.py, ollama.OllamaChat)
chat_event_decoder = msgspec.json.Decoder(_ChatEvent)
ollama_event_decoder = msgspec.json.Decoder(_OllamaEvent)


def messages_for(req: FimRequest, *, prefill: bool = False) -> list[dict[str, str]]:
    return chat_messages(req.prefix, req.middle, req.suffix, path=req.path, filetype=req.filetype, prefill=prefill)


def chat_body(req: FimRequest, *, model: str, temperature: float, top_p: float, thinking_switch: bool,
              llama: bool) -> dict[str, Any]:
    """`/v1/chat/completions`'s body for a ghost-text request. `thinking_switch`: the server
    takes `chat_template_kwargs` (llama-server, vLLM; OpenAI's own API refuses unknown
    fields); `llama`: llama-server's own fields (the prompt cache, a warm-up's n_predict 0) and
    its prefilled answer."""
    body: dict[str, Any] = {
        # llama-server continues a last assistant turn (its --prefill-assistant, on by
        # default): the answer is begun on the cursor line (prompt/styles.py)
        "messages": messages_for(req, prefill=llama),
        "max_tokens": req.n_predict,
        "temperature": temperature,
        "top_p": top_p,
        "stream": req.stream,
    }
    if model:
        body["model"] = model
    if req.stream:
        body["stream_options"] = {"include_usage": True}
    if req.seed is not None:
        body["seed"] = req.seed
    if thinking_switch:
        body["chat_template_kwargs"] = {"enable_thinking": False}
    if llama:
        body["cache_prompt"] = True
        body["n_predict"] = req.n_predict  # 0 (a warm-up) evaluates the prompt and answers nothing
        body["t_max_predict_ms"] = req.t_max_predict_ms
    return body


def _error(name: str, exc: Exception | None = None, error: Any = None) -> ProtocolError:
    if error is not None:
        return ProtocolError(f"{name}: server error in stream: {server_words(error)}")
    return ProtocolError(f"{name}: malformed stream chunk ({exc})")


def _openai_chunk(name: str, payload: bytes) -> Chunk:
    if payload == b"[DONE]":
        return Chunk(text="", done=True)
    try:
        msg = chat_event_decoder.decode(payload)
    except (msgspec.DecodeError, ValueError) as exc:
        raise _error(name, exc) from None
    if msg.error is not None:
        raise _error(name, error=msg.error)
    timings = dict(msg.timings) if msg.timings else None
    prompt_tokens = None
    if msg.usage is not None:
        prompt_tokens = msg.usage.prompt_tokens or None
        timings = {"prompt_n": float(msg.usage.prompt_tokens), "predicted_n": float(msg.usage.completion_tokens),
                   **(timings or {})}
    if not msg.choices:
        return Chunk(text="", timings=timings, prompt_tokens=prompt_tokens)
    choice = msg.choices[0]
    if choice.message is not None:  # an unstreamed answer: all of it
        return Chunk(text=choice.message.content or "", done=True, timings=timings, prompt_tokens=prompt_tokens)
    text = choice.delta.content or "" if choice.delta is not None else ""
    return Chunk(text=text, index=choice.index, timings=timings, prompt_tokens=prompt_tokens)


def read_openai_chat(name: str) -> Callable[[list[bytes]], Iterable[Chunk]]:
    """How backend `name` reads one network read's chat events: as chunks, all but the last
    marked `more`."""
    return lambda batch: _read_openai(name, batch)


def _read_openai(name: str, batch: list[bytes]) -> Iterator[Chunk]:
    last = len(batch) - 1
    for i, payload in enumerate(batch):
        chunk = _openai_chunk(name, payload)
        yield msgspec.structs.replace(chunk, more=True) if i < last and not chunk.done else chunk


def ollama_chat_body(req: FimRequest, *, model: str, temperature: float, top_p: float, thinks: bool,
                     keep_alive: str) -> dict[str, Any]:
    """`/api/chat`'s body; `thinks`: the model can think (its capabilities say so), so it is
    told not to (Ollama refuses `think` for a model that cannot)."""
    options: dict[str, Any] = {"num_predict": req.n_predict, "temperature": temperature, "top_p": top_p}
    if req.seed is not None:
        options["seed"] = req.seed
    body: dict[str, Any] = {"model": model, "messages": messages_for(req), "stream": True, "keep_alive": keep_alive,
                            "options": options}
    if thinks:
        body["think"] = False
    return body


def read_ollama_chat(name: str) -> Callable[[list[bytes]], Iterable[Chunk]]:
    """How backend `name` reads `/api/chat`'s NDJSON lines."""
    return lambda batch: _read_ollama(name, batch)


def _read_ollama(name: str, batch: list[bytes]) -> Iterator[Chunk]:
    last = len(batch) - 1
    for i, line in enumerate(batch):
        try:
            msg = ollama_event_decoder.decode(line)
        except (msgspec.DecodeError, ValueError) as exc:
            raise _error(name, exc) from None
        if msg.error is not None:
            raise _error(name, error=msg.error)
        if not msg.done:
            yield Chunk(text=msg.message.content, more=i < last)
            continue
        timings = {"prompt_n": float(msg.prompt_eval_count), "predicted_n": float(msg.eval_count),
                   "prompt_ms": msg.prompt_eval_duration / 1e6, "predicted_ms": msg.eval_duration / 1e6}
        yield Chunk(text=msg.message.content, done=True, timings=timings, prompt_tokens=msg.prompt_eval_count or None)
