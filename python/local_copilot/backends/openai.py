"""OpenAI-compatible `/v1/completions` (vLLM, LM Studio, SGLang, llama-swap, llama.cpp).

The FIM prompt is rendered here from the template registry: vLLM rejects `suffix` for
nearly every model and llama.cpp ignores it. Streams end with `data: [DONE]`; the usage
chunk has an empty `choices` list. A model whose name names no FIM family gets the prompt
style its name says (prompt/styles.py): `chat` on `/v1/chat/completions` for an instruct
model, `continue` for a base one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import httpx
import msgspec

from ..prompt.styles import CHAT_TURN_TOKENS
from ..prompt.templates import FimTemplate
from ..transport.streaming import SSEParser
from . import registry
from .base import Chunk, FimRequest, HttpBackend, Wire, auth_headers
from .chat import ChatBackend, final_event
from .chat_style import chat_body, read_openai_chat
from .probe import ModelInfo, described_model, listed_model, resolve_style
from .served import Served

if TYPE_CHECKING:
    from ..backend_config import BackendConfig


__all__ = ["OpenAIBackend", "final_event", "listed_model"]


class _Choice(msgspec.Struct):
    index: int = 0
    text: str = ""
    finish_reason: str | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _CompletionChunk(msgspec.Struct):
    choices: list[_Choice] = []
    usage: _Usage | None = None
    error: Any = None


_decoder = msgspec.json.Decoder(_CompletionChunk)


def _usage_timings(msg: _CompletionChunk) -> dict[str, float]:
    assert msg.usage is not None
    return {"prompt_n": float(msg.usage.prompt_tokens), "predicted_n": float(msg.usage.completion_tokens)}


class _Tokens(msgspec.Struct):
    tokens: list[int] = []


# vLLM's cache configuration as a Prometheus info gauge's labels
_PREFIX_CACHING = re.compile(r'vllm:cache_config_info\{[^}]*enable_prefix_caching="(True|False)"')


class OpenAIBackend(HttpBackend):
    def __init__(self, name: str, cfg: BackendConfig, client: httpx.AsyncClient) -> None:
        super().__init__(name, cfg, client)
        self.model: ModelInfo | None = None
        self.template: FimTemplate | None = None
        self.stop_token_ids: list[int] = []
        self._resolved = False  # the template and style decided (template None: the chat style)

    async def probe(self) -> ModelInfo:
        return await listed_model(self)

    @property
    def stop_strings(self) -> tuple[str, ...]:
        if self.style == "chat":
            return CHAT_TURN_TOKENS
        return self.template.special_tokens if self.template else ()

    @property
    def continues(self) -> bool:
        # the prompt ends with the typed text (prompt.templates.render); a chat answer is one turn
        return self.style != "chat"

    @property
    def counts_full_prompt(self) -> bool:
        return self.style != "chat"  # a chat prompt holds the conversation around the code

    @property
    def probed(self) -> bool:
        return self._resolved and self.model is not None

    async def context_limit(self) -> int | None:
        await self.ensure_ready()
        return self.model.n_ctx if self.model else None

    async def ensure_ready(self) -> FimTemplate | None:
        if not self._resolved:
            self.model = await self.probe()
            self.template, decision = resolve_style(self.name, self.cfg, self.model)
            self.style, self.style_reason = decision.style, decision.reason
            if self.model.owned_by == "vllm" and self.template is not None and self.template.stop:
                self.stop_token_ids = await self._special_token_ids(self.template)
            # a prompt evaluated at rest fills vLLM's prefix cache (its whole blocks) for the
            # first key typed there; a server that caches nothing would evaluate it for nothing
            self.warms = (self.model.owned_by == "vllm" and self.style != "chat"
                          and await self._vllm_prefix_caching())
            self._resolved = True
        return self.template

    METRICS_TIMEOUT_S = 2.0  # a server whose /metrics does not answer is taken at vLLM's default

    async def _vllm_prefix_caching(self) -> bool:
        """Whether vLLM keeps prompt blocks between requests: its /metrics `cache_config_info`
        says (`--no-enable-prefix-caching` turns it off); its default, on, where it does not."""
        try:
            resp = await self.client.get(self.base + "/metrics", headers=auth_headers(self.cfg),
                                         timeout=self.METRICS_TIMEOUT_S)
        except httpx.HTTPError:
            return True
        found = _PREFIX_CACHING.search(resp.text) if resp.status_code == 200 else None
        return found is None or found.group(1) == "True"

    async def described(self) -> Served:
        template = await self.ensure_ready()
        assert self.model is not None
        return described_model(self.cfg, self.style, self.model, template, await self.context_limit())

    @staticmethod
    def context_advice(backend: str, need: int, slots: int) -> list[str]:
        return [f"start the server with a larger context (vLLM: --max-model-len {-(-need // 1024) * 1024})"]

    async def _special_token_ids(self, template: FimTemplate) -> list[int]:
        """Ids of the template's stop tokens in the served model's own vocabulary.

        The template's official ids are wrong for other vocabularies (vLLM rejects
        out-of-vocab ids), so ask the server's tokenizer; a token that is not a single id
        there is left to the stop strings.
        """
        assert self.model is not None
        ids: list[int] = []
        for tok in template.stop:
            try:
                resp = await self.client.post(self.base + "/tokenize", headers=auth_headers(self.cfg),
                                              json={"model": self.model.id, "prompt": tok, "add_special_tokens": False})
                tokens = msgspec.json.decode(resp.content, type=_Tokens).tokens if resp.status_code == 200 else []
            except (httpx.HTTPError, msgspec.DecodeError):
                return []
            if len(tokens) == 1:
                ids.append(tokens[0])
        return ids

    def body(self, req: FimRequest, template: FimTemplate) -> dict[str, Any]:
        assert self.model is not None
        body: dict[str, Any] = {
            "model": self.model.id,
            "prompt": template.render(req.prefix, req.suffix, middle=req.middle, path=req.path, extra=req.extra),
            # a warm-up asks for nothing; vLLM writes at least one token
            "max_tokens": req.n_predict or 1,
            "temperature": self.cfg.temperature if req.temperature is None else req.temperature,
            "top_p": self.cfg.top_p,
            "n": req.n,
            "stream": True,
            "stream_options": {"include_usage": True},
            # OpenAI's schema (and vLLM's) takes at most 4 stop strings; the rest are cut
            # client-side by the post-processor, which knows every special token
            "stop": list(template.stop[:4]),
        }
        if req.seed is not None:
            body["seed"] = req.seed
        if self.model.owned_by == "vllm":
            # vLLM drops special tokens from text by default, so a stop string naming one never
            # matches; keep them in the text so the stop strings work for any vocabulary
            body["skip_special_tokens"] = False
            if self.stop_token_ids:
                body["stop_token_ids"] = self.stop_token_ids
        if self.model.owned_by == "llamacpp":
            body["cache_prompt"] = True
            body["t_max_predict_ms"] = req.t_max_predict_ms
        return body

    def forget(self) -> None:
        super().forget()
        self.template = None  # the server may come back with another model
        self._resolved = False
        self.warms = False

    async def raw_wire(self, prompt: str, n_predict: int, stop: tuple[str, ...]) -> Wire:
        if self.model is None:
            self.model = await self.probe()
        body: dict[str, Any] = {"model": self.model.id, "prompt": prompt, "max_tokens": n_predict, "temperature": 0.0,
                                "stream": True, "stream_options": {"include_usage": True}, "stop": list(stop[:4])}
        if self.model.owned_by == "vllm":
            body["skip_special_tokens"] = False  # the stop strings name special tokens
        if self.model.owned_by == "llamacpp":
            body["cache_prompt"] = True
        return Wire("/v1/completions", body, SSEParser(), final_event)

    async def served_model(self) -> str:
        if self.model is None:
            self.model = await self.probe()
        return self.model.id

    def wire(self, req: FimRequest) -> Wire:
        assert self._resolved and self.model is not None, "ensure_ready() first"
        if self.style == "chat":
            # chat_template_kwargs switches thinking off on the servers that take it; OpenAI's
            # own API and others may refuse a field they do not know
            owner = self.model.owned_by
            body = chat_body(req, model=self.model.id, top_p=self.cfg.top_p,
                             temperature=self.cfg.temperature if req.temperature is None else req.temperature,
                             thinking_switch=owner in ("vllm", "llamacpp", "sglang"), llama=owner == "llamacpp")
            if req.n != 1:
                body["n"] = req.n
            return Wire("/v1/chat/completions", body, SSEParser(), final_event, read_openai_chat(self.name))
        assert self.template is not None
        return Wire("/v1/completions", self.body(req, self.template), SSEParser(), final_event)

    # one request with `n` candidates; llama.cpp and Ollama get one request per candidate
    supports_n = True
    # OpenAI's usage counts tokens, with no times
    clock_timed = True

    def decode(self, payload: bytes) -> Chunk:
        msg = self._openai_event(_decoder, payload, Chunk, _usage_timings)
        if isinstance(msg, Chunk):  # the end, or the usage chunk
            return msg
        choice = msg.choices[0]
        return Chunk(text=choice.text, index=choice.index)


registry.register(registry.Kind(
    name="openai", dialect=OpenAIBackend, default_url="http://127.0.0.1:8080", ready_path="/v1/models",
    chat=ChatBackend, generic=True))
