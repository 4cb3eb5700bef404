"""Ollama `/api/generate`: NDJSON ending with `done: true`.

The prompt is rendered here and sent with `raw: true` (no server template). Only when the
model's family is unknown but its template supports insert (`.Suffix`) is `suffix` sent and
Ollama builds the prompt. A model of no FIM family gets another prompt style (prompt/styles.py):
`chat` on `/api/chat` when its template holds a conversation (most pulled models are instruct
models), else `continue` (a template that passes the prompt as it is: a base model).
temperature and top_p are always sent: the server would otherwise use its own defaults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import msgspec

from ..errors import ConfigError, ProtocolError, ServerError
from ..prompt.styles import CHAT_TURN_TOKENS, CONTINUE, Decision, name_says, no_fim_family, template_markers
from ..prompt.templates import FimTemplate, detect_family
from ..transport.streaming import NDJSONParser
from . import registry
from .base import Chunk, FimRequest, HttpBackend, Wire
from .chat import ChatBackend, ChatChunk
from .chat_style import ollama_chat_body, ollama_event_decoder, read_ollama_chat
from .probe import ModelInfo, configured_style, described_model, resolve_template
from .served import Served

if TYPE_CHECKING:
    from ..backend_config import BackendConfig


def final_line(payload: bytes) -> bool:
    # the last NDJSON line has "done": true (quotes inside text are escaped)
    return b'"done":true' in payload or b'"done": true' in payload


__all__ = ["OllamaBackend", "OllamaChat", "final_line"]

KEEP_ALIVE = "30m"  # keep the model loaded between keystrokes; the first request loads it


class _GenChunk(msgspec.Struct):
    response: str = ""
    done: bool = False
    error: str | None = None
    prompt_eval_count: int = 0
    eval_count: int = 0
    # nanoseconds (docs/api.md): the prompt's and the answer's evaluation, for the measured speeds
    prompt_eval_duration: int = 0
    eval_duration: int = 0


_decoder = msgspec.json.Decoder(_GenChunk)


class _Details(msgspec.Struct, frozen=True):
    family: str = ""


class _Show(msgspec.Struct):
    template: str = ""
    details: _Details = _Details()
    capabilities: list[str] = []
    model_info: dict[str, Any] = {}


_show_decoder = msgspec.json.Decoder(_Show)


class OllamaBackend(HttpBackend):
    def __init__(self, name: str, cfg: BackendConfig, client: httpx.AsyncClient) -> None:
        super().__init__(name, cfg, client)
        self.model: ModelInfo | None = None
        self.template: FimTemplate | None = None
        self.use_suffix = False
        self._insert = False
        self._template = ""  # the model's Ollama template (Go template text)
        self._thinks = False  # the model can think (capabilities): the chat style says not to

    async def probe(self) -> ModelInfo:
        if not self.cfg.model:
            raise ConfigError(f"set backends[{self.name!r}].model to an Ollama model name, e.g. 'qwen2.5-coder:1.5b-base'")
        try:
            show = await self.fetch("POST", "/api/show", _show_decoder, json={"model": self.cfg.model})
        except ServerError as exc:
            if exc.status == 404:
                raise ProtocolError(f"{self.name}: model {self.cfg.model!r} is not pulled; "
                                    f"run `ollama pull {self.cfg.model}`") from None
            raise
        n_ctx = next((int(v) for k, v in show.model_info.items() if k.endswith(".context_length")), None)
        self._insert = "insert" in show.capabilities or ".Suffix" in show.template
        self._template = show.template
        self._thinks = "thinking" in show.capabilities
        return ModelInfo(id=self.cfg.model, owned_by="ollama", n_ctx=n_ctx, family=show.details.family)

    @property
    def continues(self) -> bool:
        # a raw prompt ends with the typed text; with `suffix` Ollama's template places it; a
        # chat answer is one turn
        return not self.use_suffix and self.style != "chat"

    counts_full_prompt = False
    supports_n = False

    @property
    def probed(self) -> bool:
        return self.model is not None

    @property
    def stop_strings(self) -> tuple[str, ...]:
        if self.style == "chat":
            return CHAT_TURN_TOKENS
        return self.template.special_tokens if self.template else ()

    async def context_limit(self) -> int | None:
        await self.ensure_ready()
        # Ollama runs with num_ctx 4096 unless told otherwise, whatever the model could take
        return min(self.model.n_ctx or 4096, 4096) if self.model else None

    async def ensure_ready(self) -> FimTemplate | None:
        if self.model is None:
            model = await self.probe()
            self.use_suffix = False
            self.template, decision = self._decide(model)
            self.style, self.style_reason = decision.style, decision.reason
            self.model = model
        return self.template

    async def described(self) -> Served:
        template = await self.ensure_ready()
        assert self.model is not None
        return described_model(self.cfg, self.style, self.model, template, await self.context_limit(),
                               server_template="Ollama's own (the model's template has a suffix slot)")

    @staticmethod
    def context_advice(backend: str, need: int, slots: int) -> list[str]:
        return ["give the model a larger context (Ollama: num_ctx)"]

    def _decide(self, model: ModelInfo) -> tuple[FimTemplate | None, Decision]:
        """The template (CONTINUE: the continue style; None: Ollama's suffix slot, or the chat
        style) and the style, from the options, the model's names and its template."""
        forced = configured_style(self.cfg)
        if forced is not None and forced.style != "fim":
            return (CONTINUE if forced.style == "continue" else None), forced
        names = [n for n in (model.id, model.family or "") if n]
        family = next((f for f in map(detect_family, names) if f), None)
        if forced is not None or (family and not any(no_fim_family(n) for n in names)):
            try:
                template = resolve_template(self.name, self.cfg, model)
                return template, forced or Decision("fim", f"the model's name says {family}, a FIM family")
            except ConfigError:
                if not self._insert:
                    raise
        if self._insert:
            self.use_suffix = True  # Ollama's own template knows the FIM format
            return None, forced or Decision("fim", "the model's template has a suffix slot (Ollama builds the prompt)")
        chat = template_markers(self._template)
        if (chat is not None or ".Messages" in self._template) and not any(name_says(n) == "base" for n in names):
            what = f"a chat template ({chat[0]})" if chat is not None else "a chat template"
            return None, Decision("chat", f"no FIM family; the model's template is {what}")
        return CONTINUE, Decision("continue", "no FIM family; the model's template passes the prompt as it is: a base model")

    def body(self, req: FimRequest, template: FimTemplate | None) -> dict[str, Any]:
        options: dict[str, Any] = {
            "num_predict": req.n_predict,
            "temperature": self.cfg.temperature if req.temperature is None else req.temperature,
            "top_p": self.cfg.top_p,
        }
        if req.seed is not None:
            options["seed"] = req.seed
        body: dict[str, Any] = {"model": self.cfg.model, "stream": True, "keep_alive": KEEP_ALIVE, "options": options}
        if template is not None:
            body["raw"] = True
            body["prompt"] = template.render(req.prefix, req.suffix, middle=req.middle, path=req.path, extra=req.extra)
            options["stop"] = list(template.stop)
        else:
            body["prompt"] = req.prefix + req.middle
            body["suffix"] = req.suffix
        return body

    def forget(self) -> None:
        super().forget()
        self.model = None
        self.style, self.style_reason = "fim", ""

    async def raw_wire(self, prompt: str, n_predict: int, stop: tuple[str, ...]) -> Wire:
        if self.model is None:
            self.model = await self.probe()
        options = {"num_predict": n_predict, "temperature": 0.0, "stop": list(stop)}
        body = {"model": self.cfg.model, "prompt": prompt, "raw": True, "stream": True, "keep_alive": KEEP_ALIVE,
                "options": options}
        return Wire("/api/generate", body, NDJSONParser(), final_line)

    def wire(self, req: FimRequest) -> Wire:
        if self.style == "chat":
            body = ollama_chat_body(req, model=self.cfg.model, top_p=self.cfg.top_p, thinks=self._thinks,
                                    temperature=self.cfg.temperature if req.temperature is None else req.temperature,
                                    keep_alive=KEEP_ALIVE)
            return Wire("/api/chat", body, NDJSONParser(), final_line, read_ollama_chat(self.name))
        return Wire("/api/generate", self.body(req, self.template), NDJSONParser(), final_line)

    def decode(self, line: bytes) -> Chunk:
        msg = self._message(_decoder, line)
        if not msg.done:
            return Chunk(text=msg.response)
        timings = {"prompt_n": float(msg.prompt_eval_count), "predicted_n": float(msg.eval_count),
                   "prompt_ms": msg.prompt_eval_duration / 1e6, "predicted_ms": msg.eval_duration / 1e6}
        return Chunk(text=msg.response, done=True, timings=timings, prompt_tokens=msg.prompt_eval_count or None)


class OllamaChat(ChatBackend):
    """Instruction edits on Ollama: `/api/chat`, NDJSON, the last line `done: true` with the
    counts."""

    path = "/api/chat"
    NUM_CTX = 4096  # what Ollama runs a model with unless told otherwise

    async def ensure_ready(self) -> None:
        if self._ready:
            return
        if not self.cfg.model:
            raise ConfigError(f"set backends[{self.name!r}].model to an Ollama instruct model, "
                              "e.g. 'qwen2.5-coder:7b-instruct'")
        show = await self.fetch("POST", "/api/show", _show_decoder, json={"model": self.cfg.model})
        n_ctx = next((int(v) for k, v in show.model_info.items() if k.endswith(".context_length")), None)
        self.n_ctx = min(n_ctx or self.NUM_CTX, self.NUM_CTX)
        self._ready = True

    def body(self, messages: list[dict[str, str]], max_tokens: int, temperature: float, *,
             warm: bool = False) -> dict[str, Any]:
        return {"model": self.cfg.model, "messages": messages, "stream": True, "keep_alive": KEEP_ALIVE,
                "options": {"num_predict": max_tokens, "temperature": temperature}}

    def chat_wire(self, messages: list[dict[str, str]], max_tokens: int, temperature: float) -> Wire:
        return Wire(self.path, self.body(messages, max_tokens, temperature), NDJSONParser(), final_line)

    def decode(self, payload: bytes) -> Chunk:
        msg = self._message(ollama_event_decoder, payload)
        if not msg.done:
            return ChatChunk(text=msg.message.content)
        return ChatChunk(text=msg.message.content, done=True, finish=msg.done_reason or "stop",
                         prompt_tokens=msg.prompt_eval_count or None, timings={"predicted_n": float(msg.eval_count)})


registry.register(registry.Kind(
    name="ollama", dialect=OllamaBackend, default_url="http://127.0.0.1:11434", ready_path="/api/version",
    recipe="ollama", chat=OllamaChat, guess_path="/api/version"))
