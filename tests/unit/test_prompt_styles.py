"""Prompt styles (prompt/styles.py): which one each dialect picks from what its FAKE server tells
of the model (FIM tokens in its vocabulary, its chat template, its name, Ollama's template),
the `prompt` option that forces one, and what each style sends and shows. The real models
(Gemma 3 base: continue; SmolLM2 Instruct: chat) run in tests/integration/test_real_models.py."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from local_copilot.backends import make_backend
from local_copilot.config import load_config
from local_copilot.core import Core
from local_copilot.errors import ConfigError
from local_copilot.health.report import collect
from local_copilot.prompt.styles import (
    AFTER_LABEL,
    BEFORE_LABEL,
    CURSOR,
    chat_messages,
    name_says,
    no_fim_family,
    template_markers,
)
from local_copilot.snapshot import Snapshot

from ..fakes.editor import RecordingEditor
from ..fakes.fake_ollama import fake_ollama
from ..fakes.fake_server import QWEN_FIM, FakeServer, infill_stream, sse
from .test_engine import wait_until

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LINES = ["def area(width, height):", "    return ", "", "print(area(2, 3))"]


def chat_stream(pieces: list[str]) -> list[Any]:
    steps: list[Any] = [sse({"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}) for p in pieces]
    steps.append(sse({"choices": [], "usage": {"prompt_tokens": 90, "completion_tokens": len(pieces)},
                      "timings": {"prompt_n": 90, "prompt_ms": 300.0, "predicted_n": len(pieces), "predicted_ms": 40.0}}))
    steps.append(b"data: [DONE]\n\n")
    return steps


def llama_fake(model: str, chat_template: str | None, answer: list[str], vocab: tuple[str, ...] = ()) -> FakeServer:
    """A llama-server-shaped fake: /props names `model` and reports `chat_template`; `vocab`:
    the strings its /tokenize calls single tokens; completions answer `answer`, as chat events
    on the chat endpoint."""
    props: dict[str, Any] = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1, "model_path": model}
    if chat_template is not None:
        props["chat_template"] = chat_template

    def script(path: str, body: dict[str, Any]):
        if path == "/props":
            return 200, [json.dumps(props).encode()]
        if path == "/v1/chat/completions":
            return 200, chat_stream(answer)
        return 200, infill_stream(answer)

    srv = FakeServer(script)
    srv.fim_tokens = vocab
    return srv


@pytest.fixture()
def servers():
    made: list[FakeServer] = []
    yield made
    for s in made:
        s.close()


async def shown_for(srv: FakeServer, options: dict[str, Any] | None = None, lines: list[str] = LINES, row: int = 1,
                    backend: str = "llama.cpp") -> tuple[str, Any]:
    """The final ghost text the engine draws for the cursor at the end of `lines[row]`, and the
    backend it used."""
    editor = RecordingEditor()
    engine = Core(editor)
    entry = {"url": srv.url, "temperature": 0, **(options or {})}
    engine.configure(load_config({"backend": backend, "backends": {backend: entry}, "speculative": False}))
    line = lines[row]
    engine.ghost.submit(Snapshot(buf=1, tick=1, row=row, col=len(line.encode()), first=0, lines=lines, seq=1, ft="python",
                           path="/src/geometry.py"))
    await wait_until(lambda: any(p.final for p in editor.plans) or "down" in editor.states)
    backend_used = engine.backend
    await engine.close()
    assert "down" not in editor.states, editor.notes
    return [p for p in editor.plans if p.final][-1].text, backend_used


def requests(srv: FakeServer, path: str) -> list[dict[str, Any]]:
    return [b for p, b in srv.requests if p == path]


async def test_a_model_with_a_chat_template_of_its_own_and_no_fim_tokens_gets_the_chat_style(servers: list[FakeServer]) -> None:
    srv = llama_fake("/models/SmolLM2-135M-Instruct.Q4_1.gguf", CHATML,
                     ["```python\n", "width * height\n", "```\n", "This returns the area."],
                     vocab=("<|im_start|>", "<|im_end|>"))
    servers.append(srv)
    text, backend = await shown_for(srv)
    assert backend.style == "chat" and "ChatML" in backend.style_reason
    assert text == "width * height"  # what Tab inserts: no fence, no prose
    [body] = requests(srv, "/v1/chat/completions")
    # the text after the cursor, then the text before it: the turn ends at the cursor
    user = body["messages"][-2]["content"]
    assert user.startswith("File: geometry.py (python)\n" + AFTER_LABEL + "\n\n\nprint(area(2, 3))")
    assert user.endswith(BEFORE_LABEL + "\ndef area(width, height):\n    return ") and CURSOR not in user
    assert body["messages"][0]["role"] == "system" and "only the code" in body["messages"][0]["content"]
    # one example, then the answer begun on the cursor line: llama-server continues it
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user", "assistant"]
    assert body["messages"][-1]["content"] == "    return "
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["cache_prompt"] is True and body["temperature"] == 0
    assert not requests(srv, "/infill") and not requests(srv, "/completion")


async def test_llama_servers_chatml_fallback_is_not_the_models_template(servers: list[FakeServer]) -> None:
    # Gemma 3 270M base: no chat template in its file, so llama-server reports its ChatML
    # fallback, whose markers are no tokens of Gemma's vocabulary: a base model
    srv = llama_fake("/models/gemma-3-270m-q4_k_m.gguf", CHATML, [" width * height\n", "\nprint(area(2, 3))"])
    servers.append(srv)
    text, backend = await shown_for(srv)
    assert backend.style == "continue" and "no chat template of its own" in backend.style_reason
    # the text after the cursor is not in the prompt, and what the model repeats of it is cut;
    # the space typed last is left out of the prompt (the model's tokens carry their leading
    # space) and taken off its answer
    [body] = requests(srv, "/completion")
    assert body["prompt"] == "def area(width, height):\n    return"
    assert text == "width * height"


async def test_a_fim_looking_vocabulary_is_no_proof_for_a_family_without_fim_training(servers: list[FakeServer]) -> None:
    srv = llama_fake("/models/gemma-3-1b-pt.gguf", CHATML, ["width * height"], vocab=QWEN_FIM)
    servers.append(srv)
    _, backend = await shown_for(srv)
    assert backend.style == "continue" and "FIM-looking" in backend.style_reason
    # the same vocabulary under a coder model's name is FIM, as always
    coder = llama_fake("/models/qwen2.5-coder-0.5b-q8_0.gguf", CHATML, ["width * height"], vocab=QWEN_FIM)
    servers.append(coder)
    _, backend = await shown_for(coder)
    assert backend.style == "fim" and requests(coder, "/completion")[0]["prompt"].startswith("<|fim_prefix|>")


@pytest.mark.parametrize("forced", ["chat", "continue", "fim"])
async def test_the_prompt_option_forces_a_style(servers: list[FakeServer], forced: str) -> None:
    srv = llama_fake("/models/qwen2.5-coder-0.5b-q8_0.gguf", CHATML, ["width * height"], vocab=QWEN_FIM)
    servers.append(srv)
    _, backend = await shown_for(srv, {"prompt": forced})
    assert backend.style == forced and "configured" in backend.style_reason
    where = {"chat": "/v1/chat/completions", "continue": "/completion", "fim": "/completion"}[forced]
    body = requests(srv, where)[0]
    if forced == "continue":
        assert body["prompt"] == "def area(width, height):\n    return"
    if forced == "fim":
        assert body["prompt"].startswith("<|fim_prefix|>")


async def test_an_old_server_that_tells_no_chat_template_keeps_infill(servers: list[FakeServer]) -> None:
    srv = llama_fake("/models/mystery.gguf", None, ["width * height"])
    servers.append(srv)
    _, backend = await shown_for(srv)
    assert backend.style == "fim" and requests(srv, "/infill")


def openai_fake(model_id: str, answer: list[str]) -> FakeServer:
    def script(path: str, body: dict[str, Any]):
        if path == "/v1/models":
            return 200, [json.dumps({"data": [{"id": model_id, "owned_by": "vllm", "max_model_len": 4096}]}).encode()]
        if path == "/tokenize":
            return 200, [b'{"tokens": [1, 2]}']
        if path == "/v1/chat/completions":
            return 200, chat_stream(answer)
        steps = [sse({"choices": [{"index": 0, "text": p}]}) for p in answer]
        return 200, [*steps, b"data: [DONE]\n\n"]

    return FakeServer(script)


async def test_openai_compatible_servers_choose_by_the_models_name(servers: list[FakeServer]) -> None:
    chat = openai_fake("HuggingFaceTB/SmolLM2-135M-Instruct", ["<think>", "multiply", "</think>", "width * height"])
    base = openai_fake("google/gemma-3-270m", [" width * height\n", "\nprint(area(2, 3))"])
    unknown = openai_fake("my-private-model", ["x"])
    servers.extend([chat, base, unknown])
    text, backend = await shown_for(chat, backend="vllm")
    assert backend.style == "chat" and text == "width * height"
    body = requests(chat, "/v1/chat/completions")[0]
    assert body["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert body["chat_template_kwargs"] == {"enable_thinking": False}  # vLLM takes the switch
    text, backend = await shown_for(base, backend="vllm")
    assert backend.style == "continue" and text == "width * height"
    assert requests(base, "/v1/completions")[0]["prompt"] == "def area(width, height):\n    return"
    cfg = load_config({"backend": "vllm", "backends": {"vllm": {"url": unknown.url}}}).active
    async with httpx.AsyncClient() as client:
        with pytest.raises(ConfigError, match="prompt = 'chat'"):
            await make_backend("vllm", cfg, client).context_limit()


async def test_ollama_chat_models_get_the_chat_style_and_base_models_continue(servers: list[FakeServer]) -> None:
    chatml = "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n"
    srv = fake_ollama({"smollm2:135m": {"family": "llama", "template": chatml, "capabilities": ["completion"]},
                       "gemma3:270m-pt": {"family": "gemma3", "template": "{{ .Prompt }}"}}, ["width * height"])
    servers.append(srv)

    def chat_answer(path: str, body: dict[str, Any]):
        if path == "/api/chat":
            return 200, [json.dumps({"message": {"content": "`width * height`"}, "done": False}).encode() + b"\n",
                         json.dumps({"message": {"content": ""}, "done": True, "prompt_eval_count": 80,
                                     "eval_count": 5}).encode() + b"\n"]
        return inner(path, body)

    inner, srv.script = srv.script, chat_answer
    text, backend = await shown_for(srv, {"model": "smollm2:135m"}, backend="ollama")
    assert backend.style == "chat" and text == "width * height"
    [body] = requests(srv, "/api/chat")
    assert body["messages"][-1]["content"].startswith("File: geometry.py (python)")
    assert "think" not in body  # the model cannot think: Ollama would refuse the field
    text, backend = await shown_for(srv, {"model": "gemma3:270m-pt"}, backend="ollama")
    assert backend.style == "continue"
    assert requests(srv, "/api/generate")[-1]["prompt"] == "def area(width, height):\n    return"


async def test_health_says_which_style_is_in_use_and_why(servers: list[FakeServer]) -> None:
    srv = llama_fake("/models/SmolLM2-135M-Instruct.Q4_1.gguf", CHATML, ["```python\n", "fibonacci(n - 1)\n", "```"],
                     vocab=("<|im_start|>", "<|im_end|>"))
    servers.append(srv)
    report = await collect({"backends": {"llama.cpp": {"url": srv.url}}})
    [section] = [s for s in report.sections if s.name.startswith("backend llama.cpp")]
    style = next(i for i in section.items if i.message.startswith("prompt style"))
    assert style.message == "prompt style: chat (no FIM tokens; its own chat template (ChatML))"
    assert any("prompt = 'continue'" in a for a in style.advice)
    # the probe is judged on what the editor would show: the fence is no chat reply there
    probe = next(i for i in section.items if "probe" in i.message)
    assert probe.level == "ok" and probe.message.startswith("chat probe: 'fibonacci(n - 1)'"), probe


async def test_a_continuation_that_does_not_start_with_the_typed_space_is_not_shown(servers: list[FakeServer]) -> None:
    srv = llama_fake("/models/gemma-3-270m-q4_k_m.gguf", CHATML, ["\n    # note"])
    servers.append(srv)
    text, _ = await shown_for(srv)
    assert text == ""  # "return " then a line break: not what the typed space goes on with
    srv = llama_fake("/models/gemma-3-270m-q4_k_m.gguf", CHATML, ["  width"])
    servers.append(srv)
    text, _ = await shown_for(srv)
    assert text == " width"  # one space was typed already, the model wrote two


def test_the_detection_helpers() -> None:
    assert template_markers(CHATML) == ("ChatML", ("<|im_start|>", "<|im_end|>"))
    assert template_markers("{{ bos_token }}<start_of_turn>user\n") is None  # one marker alone says nothing
    assert no_fim_family("/m/gemma-3-270m-q4_k_m.gguf") and not no_fim_family("codegemma-2b-q8.gguf")
    assert no_fim_family("Llama-3.2-1B") and not no_fim_family("CodeLlama-7b") and not no_fim_family("qwen2.5-coder")
    assert name_says("SmolLM2-135M-Instruct.Q4_1.gguf") == "instruct" and name_says("gemma-3-270m-it") == "instruct"
    assert name_says("qwen2.5-coder:1.5b-base") == "base" and name_says("gemma-3-1b-pt") == "base"
    assert name_says("gemma-3-270m-q4_k_m.gguf") == ""


def test_the_chat_answer_is_begun_on_the_cursor_line_where_the_server_continues_it() -> None:
    # llama-server continues a last assistant turn: a small instruct model begun on the cursor
    # line writes the code that follows it (asked for the code at a marker, SmolLM2 answered
    # the example again or described the file)
    plain = chat_messages("def f(x):\n    return", " x", "\nprint(f(1))", path="a.py", filetype="python")
    assert [m["role"] for m in plain][-1] == "user"
    begun = chat_messages("def f(x):\n    return", " x", "\nprint(f(1))", path="a.py", filetype="python", prefill=True)
    assert begun[:-2] == plain[:-1] and begun[-1] == {"role": "assistant", "content": "    return x"}
    # the turn before it ends at the cursor: the text after it comes first (a small model
    # begun on the cursor line wrote the marker and the line's rest again)
    assert begun[-2]["content"] == (f"File: a.py (python)\n{AFTER_LABEL}\n\nprint(f(1))\n\n"
                                    f"{BEFORE_LABEL}\ndef f(x):\n    return x")
    # at a line's start the line above begins it: an empty turn is no prefill
    assert chat_messages("def f(x):\n", "", "", prefill=True)[-1]["content"] == "def f(x):\n"
    assert chat_messages("", "", "x = 1", prefill=True)[-1]["content"] == ""
