"""llama.cpp `llama-server`: `/completion` with a prompt rendered here, or `/infill`.

Which FIM template the served model speaks is read from its own vocabulary: one `/tokenize`
call tells which templates' markers are single tokens there (the configured `fim_template`
wins; `endpoint` can force either way). The rendered prompt puts the cursor line's text after
the middle marker, so typing only appends to the prompt and llama-server's prompt cache keeps
everything before it; `/infill` puts that text before the suffix, so the server re-evaluates
the whole suffix on every keystroke. A vocabulary with no known markers gets `/infill`, which
builds the prompt from the model's own FIM tokens, where the server does not say more. A model
without FIM tokens gets another prompt style (prompt/styles.py): `chat` through the
OpenAI-compatible chat endpoint when `/props` reports a chat template of its own (its turn
markers are single tokens: llama-server reports a ChatML fallback for a model that has none),
else `continue`; the `prompt` option forces one.

SSE without `[DONE]`; the final chunk has `stop: true` and `timings`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

import httpx
import msgspec

from ..errors import BackendError, ConfigError, ProtocolError, ServerError
from ..log import log
from ..prompt.styles import CHAT_TURN_TOKENS, CONTINUE, Decision, name_says, no_fim_family, template_markers
from ..prompt.templates import FimTemplate, detect_family, get_template, names
from ..transport.streaming import SSEParser
from . import registry
from .base import Chunk, FimRequest, HttpBackend, Wire
from .chat_style import chat_body, read_openai_chat
from .llama_chat import LlamaChat
from .llama_props import Props, model_query, server_props
from .served import Served
from .slots import SlotState

if TYPE_CHECKING:
    from ..backend_config import BackendConfig


def _final(payload: bytes) -> bool:
    # the final SSE event has "stop": true (quotes inside content are escaped, so no false match)
    return b'"stop":true' in payload or b'"stop": true' in payload


def _chat_final(payload: bytes) -> bool:
    # the chat endpoint's stream ends with a [DONE] event
    return payload == b"[DONE]"


__all__ = ["LlamaCppBackend", "CACHE_REUSE_TOKENS"]

CACHE_REUSE_TOKENS = 64


class _InfillChunk(msgspec.Struct):
    content: str = ""
    stop: bool = False
    timings: dict[str, float] | None = None
    tokens_evaluated: int | None = None
    # the slot that ran the request: -1 (as asked) on partial chunks, the slot on the last
    id_slot: int = -1
    error: Any = None


class _SlotView(msgspec.Struct):
    id: int
    is_processing: bool = False
    # the last task it ran: absent on a slot that has run none
    id_task: int | None = None


class _Piece(msgspec.Struct):
    piece: Any = ""


class _Pieces(msgspec.Struct):
    tokens: list[_Piece] = []


RESPONSE_FIELDS = list(_InfillChunk.__struct_fields__)
_decoder = msgspec.json.Decoder(_InfillChunk)
_batch_decoder = msgspec.json.Decoder(list[_InfillChunk])
_pieces_decoder = msgspec.json.Decoder(_Pieces)
_slots_decoder = msgspec.json.Decoder(list[_SlotView])

# Which template to try first when several fit a vocabulary: a StarCoder2 vocab also has
# StarCoder's <fim_*> markers, and the PSM form of CodeLlama is the one it was mostly trained on.
_PREFERENCE = ("qwen", "deepseek", "starcoder2", "starcoder", "codegemma", "codellama", "codestral")
# FIM prefix tokens llama.cpp finds by their text beside the templates' (llama-vocab.cpp): one
# of them as a single token lets /infill build the prompt for a family without a template here
_INFILL_ONLY = ("<fim-prefix>", "<|code_prefix|>")
# what the chat style's turn markers are checked against (prompt/styles.py)
_CHAT_MARKERS = ("<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>", "<|start_header_id|>",
                 "<|eot_id|>", "<|user|>", "<|end|>", "<|start_of_role|>", "<|end_of_role|>", "<｜User｜>",
                 "<｜Assistant｜>", "[INST]", "[/INST]")


class LlamaCppBackend(HttpBackend):
    def __init__(self, name: str, cfg: BackendConfig, client: httpx.AsyncClient) -> None:
        super().__init__(name, cfg, client)
        self.props: Props | None = None
        self.template: FimTemplate | None = None
        self._resolved = False  # template looked up (None after that = /infill, or the chat style)
        self._slot_view = True  # /slots answers (--no-slots turns it off)

    def forget(self) -> None:
        super().forget()
        self.props = None  # a restarted server may have other slots, or another model
        self.template = None
        self._resolved = False
        self._slot_view = True
        self.slots.clear()
        self.style, self.style_reason = "fim", ""

    async def probe(self) -> Props:
        return await server_props(self)

    supports_n = False
    # n_predict 0 evaluates the prompt and generates nothing: a warm-up (Engine.warm)
    warms = True

    @property
    def places_in_slots(self) -> bool:  # type: ignore[override]
        # (known once probed: /props says how many slots the server runs)
        return self.props is not None and self.props.total_slots > 1

    # /slots answers in a few ms even while a prompt is evaluated; longer, and the server
    # chooses the slot instead (backends/slots.py), which costs the next request a wait at most
    SLOTS_TIMEOUT_S = 0.25

    async def slot_states(self) -> list[SlotState] | None:
        if not self._slot_view or self.props is None:
            return None
        path = self.props.via + "/slots" + model_query(self.cfg)
        try:
            views = await self.fetch("GET", path, _slots_decoder, timeout_s=self.SLOTS_TIMEOUT_S)
        except ServerError as exc:
            # started with --no-slots (501), or a proxy without it: not asked again
            self._slot_view = exc.status not in (404, 501)
            return None
        except ProtocolError:
            self._slot_view = False
            return None
        except BackendError as exc:  # unreachable, too slow, or held (Retry-After)
            log.debug("%s: /slots: %s", self.name, exc)
            return None
        return [SlotState(v.id, v.is_processing, -1 if v.id_task is None else v.id_task) for v in views]

    @property
    def continues(self) -> bool:
        # /infill puts the text so far before the suffix: the model would start the middle anew;
        # a chat answer is one turn
        return self.template is not None

    @property
    def counts_full_prompt(self) -> bool:
        # /completion counts the prompt we rendered; /infill counts what is left after its cuts;
        # a chat prompt holds the conversation around the code
        return self.template is not None

    @property
    def stop_strings(self) -> tuple[str, ...]:
        # /infill renders the prompt server-side and ends at the model's own EOG tokens
        if self.style == "chat":
            return CHAT_TURN_TOKENS
        return self.template.special_tokens if self.template else ()

    @property
    def resolved(self) -> bool:
        """Whether the prompt form (a template for /completion, or /infill) is decided yet."""
        return self._resolved

    @property
    def endpoint(self) -> str:
        if self.style == "chat":
            return "/v1/chat/completions"
        return "/completion" if self.template is not None else "/infill"

    async def context_limit(self) -> int | None:
        if not self._resolved:
            await self.ensure_ready()
        assert self.props is not None
        return self.props.default_generation_settings.n_ctx or None

    async def ensure_ready(self) -> FimTemplate | None:
        if self.props is None:
            self.props = await self.probe()
        if not self._resolved:
            self.template, decision = await self._resolve(self.props)
            self.style, self.style_reason = decision.style, decision.reason
            self._resolved = True
        return self.template

    async def _resolve(self, props: Props) -> tuple[FimTemplate | None, Decision]:
        """The template to render prompts with (None: /infill, or the chat style), and the
        prompt style with the reason for it."""
        cfg = self.cfg
        if cfg.prompt == "continue":
            return CONTINUE, Decision("continue", "configured (prompt = 'continue')")
        if cfg.prompt == "chat":
            return None, Decision("chat", "configured (prompt = 'chat')")
        if cfg.prompt == "fim" or cfg.fim_template or cfg.endpoint != "auto":
            what = ("prompt = 'fim'" if cfg.prompt == "fim" else
                    f"fim_template = {cfg.fim_template!r}" if cfg.fim_template else f"endpoint = {cfg.endpoint!r}")
            return await self._resolve_template(props), Decision("fim", f"configured ({what})")
        single = await self._single_pieces(props)
        name = props.model_alias or props.model_path
        found = self._template_in(single, props)
        untrained = no_fim_family(name)
        if found is not None and not untrained:
            return found, Decision("fim", f"the vocabulary has {found.name}'s FIM tokens")
        if any(m in single for m in _INFILL_ONLY) and not untrained:
            return None, Decision("fim", "the vocabulary has FIM tokens llama-server knows (/infill builds the prompt)")
        base = name.replace("\\", "/").rsplit("/", 1)[-1] or "the model"
        fim_looking = f"{found.name}'s FIM-looking tokens are in the vocabulary, but {base}'s family has no FIM " \
                      "training; " if found is not None else ""
        if props.chat_template is None and found is None:
            # the server tells nothing of a chat template (an old llama-server): /infill, which
            # builds the prompt from FIM tokens the model may still declare
            return None, Decision("fim", "no FIM tokens known here and no chat template reported: "
                                         "/infill builds the prompt from the model's own")
        own = template_markers(props.chat_template or "")
        if own is not None and all(m in single for m in own[1]) and name_says(name) != "base":
            return None, Decision("chat", f"{fim_looking or 'no FIM tokens; '}its own chat template ({own[0]})")
        why = "the name says a base model" if own is not None and name_says(name) == "base" else "no chat template of its own"
        return CONTINUE, Decision("continue", f"{fim_looking or 'no FIM tokens; '}{why}: a base model")

    async def _resolve_template(self, props: Props) -> FimTemplate | None:
        """The template to render prompts with (/completion), or None for /infill."""
        if self.cfg.endpoint == "infill":
            return None
        if self.cfg.fim_template:
            return get_template(self.cfg.fim_template)
        found = self._template_in(await self._single_pieces(props), props)
        if found is None and self.cfg.endpoint == "completion":
            raise ConfigError(f"{self.name}: cannot tell the served model's FIM format for endpoint='completion'; "
                              f"set fim_template to one of: {', '.join(names())}")
        return found

    async def _single_pieces(self, props: Props) -> set[str]:
        """Which FIM and chat-turn markers are single tokens in the served model's vocabulary
        (one /tokenize call)."""
        candidates = [get_template(n) for n in dict.fromkeys(_PREFERENCE + tuple(names()))]
        wanted = sorted({m for t in candidates for m in t.markers} | {*_INFILL_ONLY, *_CHAT_MARKERS})
        try:
            found = await self.fetch("POST", props.via + "/tokenize", _pieces_decoder,
                                     json={"content": "\n".join(wanted), "with_pieces": True, **self._model()})
        except (ServerError, ProtocolError):
            return set()  # an old or proxied server without /tokenize: /infill still works
        # sentencepiece vocabs spell CodeLlama's markers "▁<PRE>"
        return {p.piece.strip().lstrip("\u2581") for p in found.tokens if isinstance(p.piece, str)}

    @staticmethod
    def _template_in(single: set[str], props: Props) -> FimTemplate | None:
        """The first template whose markers are all in `single` (the model's name decides the
        order among several)."""
        candidates = [get_template(n) for n in dict.fromkeys(_PREFERENCE + tuple(names()))]
        named = [detect_family(n) for n in (props.model_alias, props.model_path.rsplit("/", 1)[-1]) if n]
        order = [get_template(n) for n in dict.fromkeys([n for n in named if n] + [t.name for t in candidates])]
        return next((t for t in order if all(m in single for m in t.markers)), None)

    def body(self, req: FimRequest) -> dict[str, Any]:
        if self.template is not None:
            body: dict[str, Any] = {
                "prompt": self.template.render(req.prefix, req.suffix, middle=req.middle, path=req.path,
                                               extra=req.extra),
            }
        else:
            body = {
                "input_prefix": req.prefix,
                "input_suffix": req.suffix,
                "prompt": req.middle,
                "input_extra": [{"filename": c.filename, "text": c.text} for c in req.extra],
            }
        body.update({
            "n_predict": req.n_predict,
            "n_indent": req.n_indent,
            "t_max_predict_ms": req.t_max_predict_ms,
            "cache_prompt": True,
            # chunk reuse (`n_cache_reuse`): lines dropped from the prompt's start are shifted out of the
            # cache instead of evaluating the rest again. The FIM presets' 256-token chunks are
            # longer than a slow server's whole window (prompt/speed.py), so ask for shorter ones
            "n_cache_reuse": CACHE_REUSE_TOKENS,
            "stream": req.stream,
            "temperature": self.cfg.temperature if req.temperature is None else req.temperature,
            "top_p": self.cfg.top_p,
            "top_k": 40,
            "samplers": self.cfg.samplers,
            # only what _InfillChunk reads: llama-server otherwise echoes the whole prompt and its
            # settings in every answer (~13 KB per keystroke on the bench, against ~0.3 KB)
            "response_fields": RESPONSE_FIELDS,
        })
        if req.seed is not None:
            body["seed"] = req.seed
        body.update(self._model())
        if req.slot is not None:
            # the slot holding this buffer's prompt, named after a request of it was superseded:
            # the server runs this one there once that one stops (backends/slots.py)
            body["id_slot"] = req.slot
        return body

    def _model(self) -> dict[str, str]:
        """The entry's model, named in every request: a router-mode server serves several."""
        return {"model": self.cfg.model} if self.cfg.model else {}

    def wire(self, req: FimRequest) -> Wire:
        if self.style == "chat":
            temperature = self.cfg.temperature if req.temperature is None else req.temperature
            body = chat_body(req, model=self.cfg.model, temperature=temperature, top_p=self.cfg.top_p,
                             thinking_switch=True, llama=True)
            return Wire("/v1/chat/completions", body, SSEParser(), _chat_final, read_openai_chat(self.name))
        # (the endpoint property's answer, without a call per key)
        return Wire("/completion" if self.template is not None else "/infill", self.body(req), SSEParser(), _final)

    async def raw_wire(self, prompt: str, n_predict: int, stop: tuple[str, ...]) -> Wire:
        body = {"prompt": prompt, "n_predict": n_predict, "cache_prompt": True, "stream": True, "temperature": 0.0,
                "top_k": 1, "stop": list(stop), "response_fields": RESPONSE_FIELDS, **self._model()}
        return Wire("/completion", body, SSEParser(), _final)

    async def served_model(self) -> str:
        if self.props is None:
            self.props = await self.probe()
        return self.props.model_alias or self.props.model_path.rsplit("/", 1)[-1]

    async def single_tokens(self, texts: tuple[str, ...]) -> frozenset[str]:
        via = self.props.via if self.props is not None else ""
        try:
            found = await self.fetch("POST", via + "/tokenize", _pieces_decoder,
                                     json={"content": "\n".join(texts), "with_pieces": True, **self._model()})
        except (ServerError, ProtocolError):
            return frozenset()
        return frozenset(p.piece for p in found.tokens if isinstance(p.piece, str) and p.piece in texts)

    async def described(self) -> Served:
        return _described(self, await self.ensure_ready())

    @staticmethod
    def context_advice(backend: str, need: int, slots: int) -> list[str]:
        want = -(-need // 256) * 256  # llama.cpp pads slots to 256 tokens
        return [f"start llama-server with -c {want * slots} -np {slots} (or fewer --parallel slots: "
                f"each gets -c / np tokens)",
                f"when local-copilot starts it: backends[{backend!r}].server = {{ context_tokens = {want} }}, "
                f"or parallel = 1"]

    @property
    def probed(self) -> bool:
        return self._resolved and self.props is not None

    def chunks(self, batch: list[bytes]) -> Iterable[Chunk]:
        """One network read's events: all but the last merged into one chunk, decoded as one
        JSON array. A streamed continuation delivers dozens of tokens per read, and a decode,
        a Chunk and a reading step per token would cost the host far more than one decode per
        read. Anything unusual (a bad event, an error, a stop before the last)
        goes event by event, so its message and the text before it stay as they were."""
        if len(batch) > 1:
            try:
                msgs = _batch_decoder.decode(b"[" + b",".join(batch) + b"]")
            except (msgspec.DecodeError, ValueError):
                msgs = None
            if msgs is not None and all(m.error is None and not m.stop for m in msgs[:-1]) and msgs[-1].error is None:
                parts = tuple(m.content for m in msgs[:-1] if m.content)
                return [Chunk(text="".join(parts), more=True, parts=parts), self._chunk(msgs[-1])]
        return super().chunks(batch)

    def decode(self, payload: bytes) -> Chunk:
        return self._chunk(self._message(_decoder, payload))

    @staticmethod
    def _chunk(msg: _InfillChunk) -> Chunk:
        if not msg.stop:
            return Chunk(text=msg.content)
        return Chunk(text=msg.content, done=True, timings=msg.timings, prompt_tokens=msg.tokens_evaluated,
                     slot=msg.id_slot if msg.id_slot >= 0 else None)


def _described(backend: LlamaCppBackend, template: FimTemplate | None) -> Served:
    props = backend.props
    assert props is not None
    prompt: tuple[Literal["ok", "info"], str] | None = None
    if backend.style != "fim":
        pass  # no FIM prompt to tell of
    elif template is not None:
        how = "configured" if backend.cfg.fim_template else "read from the served vocabulary"
        prompt = ("ok", f"FIM prompt: {template.name} ({how}), rendered here and sent to /completion "
                        "(the typed text last: a request can be continued)")
    else:
        family = detect_family(props.model_path or props.model_alias or "")
        prompt = ("info", "FIM prompt: built by llama-server (/infill) from the model's own FIM tokens"
                  + (f"; the name says {family}" if family else ""))
    return Served(model=props.model_alias or props.model_path or "(unnamed)", hint=props.model_path or props.model_alias,
                  prompt=prompt, context=props.default_generation_settings.n_ctx or None, slots=props.total_slots,
                  program="llamacpp")


registry.register(registry.Kind(
    name="llama.cpp", dialect=LlamaCppBackend, default_url="http://127.0.0.1:8012", ready_path="/health",
    recipe="llama.cpp", chat=LlamaChat, guess_path="/props"))
