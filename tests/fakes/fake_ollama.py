"""A FAKE Ollama (it cannot be installed here) that follows its documented API:
/api/version, /api/show (template, details.family, capabilities, model_info), /api/tags, and
/api/generate streaming NDJSON that ends with `done: true`. Unknown models get 404
`{"error": "model 'x' not found"}`, as Ollama answers.
"""

from __future__ import annotations

import json
from typing import Any

from .fake_server import FakeServer, Step

QWEN_TEMPLATE = "{{- if .Suffix }}<|fim_prefix|>{{ .Prompt }}<|fim_suffix|>{{ .Suffix }}<|fim_middle|>{{- else }}{{ .Prompt }}{{- end }}"


def fake_ollama(models: dict[str, dict[str, Any]], answer: list[str]) -> FakeServer:
    """`models`: name -> {"family": ..., "template": ..., "capabilities": [...]}."""

    def script(path: str, body: dict[str, Any]) -> tuple[int, list[Step]]:
        name = body.get("model", "")
        if path == "/api/version":
            return 200, [json.dumps({"version": "0.12.6"}).encode()]
        if path == "/api/tags":
            return 200, [json.dumps({"models": [{"name": n} for n in models]}).encode()]
        if name not in models:
            return 404, [json.dumps({"error": f"model '{name}' not found"}).encode()]
        info = models[name]
        if path == "/api/show":
            template = info.get("template", "")
            # as Ollama answers: "insert" when the template has a suffix slot; the architecture
            # under general.architecture and each hyperparameter under its name
            capabilities = ["completion", *(["insert"] if ".Suffix" in template else [])]
            arch = info.get("family", "x")
            return 200, [json.dumps({
                "template": template,
                "details": {"family": info.get("family", "")},
                "capabilities": info.get("capabilities", capabilities),
                "model_info": {"general.architecture": arch, f"{arch}.context_length": 32768},
            }).encode()]
        if path == "/api/generate":
            steps: list[Step] = []
            for tok in answer:
                steps.append(json.dumps({"model": name, "response": tok, "done": False}).encode() + b"\n")
            steps.append(json.dumps({"model": name, "response": "", "done": True, "done_reason": "stop",
                                     "prompt_eval_count": 26, "eval_count": len(answer)}).encode() + b"\n")
            return 200, steps
        return 404, [b'{"error":"not found"}']

    return FakeServer(script)
