"""The health report (diagnostics.collect) and `local-copilot doctor`, against loopback FAKE
servers where a real one cannot misbehave on demand (a vLLM that answers 500, a chat model).
The real llama-server cases are in tests/integration/test_health.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from local_copilot.cli import main as cli
from local_copilot.health import report as diagnostics
from local_copilot.health.report import Report, collect
from local_copilot.servers.ports import free_port

from ..fakes.fake_server import FakeServer, Step, infill_stream, llama, sse


def items(report: Report, section: str) -> list[tuple[str, str, list[str]]]:
    sec = next(s for s in report.sections if s.name.startswith(section))
    return [(i.level, i.message, i.advice) for i in sec.items]


def find(report: Report, section: str, text: str) -> tuple[str, str, list[str]]:
    found = [i for i in items(report, section) if text in i[1]]
    assert found, f"{text!r} not in {items(report, section)}"
    return found[0]


def openai_fake(completion: tuple[int, list[Step]], owned_by: str = "vllm") -> FakeServer:
    models = {"object": "list", "data": [{"id": "qwen2.5-coder-1.5b", "owned_by": owned_by, "max_model_len": 8192}]}

    def script(path: str, body: dict[str, Any]) -> tuple[int, list[Step]]:
        if path == "/v1/models":
            return 200, [json.dumps(models).encode()]
        if path == "/tokenize":
            return 200, [json.dumps({"tokens": [7]}).encode()]
        return completion

    return FakeServer(script)


def completion_stream(texts: list[str]) -> tuple[int, list[Step]]:
    steps: list[Step] = [sse({"choices": [{"index": 0, "text": t}]}) for t in texts]
    steps.append(sse({"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": len(texts)}}))
    steps.append(b"data: [DONE]\n\n")
    return 200, steps


@pytest.fixture()
def unused_port() -> int:
    return free_port()  # bound and released: nothing listens there


@pytest.fixture()
def fakes():  # noqa: ANN201
    made: list[FakeServer] = []
    yield made
    for f in made:
        f.close()


async def test_a_healthy_llama_cpp_backend(fakes: list[FakeServer]) -> None:
    fake = FakeServer(llama(infill_stream(["n"]), n_ctx=4096))
    fakes.append(fake)
    report = await collect({"backends": {"llama.cpp": {"url": fake.url}}}, stats=None, editor=True)
    assert find(report, "backend llama.cpp (active)", "reachable at")[0] == "ok"
    assert find(report, "backend llama.cpp", "context per request: 4096")[0] == "ok"
    assert find(report, "backend llama.cpp", "FIM probe: 'n'")[0] == "ok"
    assert not report.broken
    # the probe is a real FIM request through the backend class
    infill = [b for p, b in fake.requests if p == "/infill"]
    assert infill and infill[0]["input_suffix"].startswith("\n    return fibonacci")


async def test_the_fim_prompt_line_says_which_endpoint_llama_cpp_gets(fakes: list[FakeServer]) -> None:
    from ..fakes.fake_server import QWEN_FIM

    plain = FakeServer(llama(infill_stream(["n"])))  # no known FIM markers in its vocabulary
    qwen = FakeServer(llama(infill_stream(["n"])))
    qwen.fim_tokens = QWEN_FIM
    fakes += [plain, qwen]
    report = await collect({"backends": {"llama.cpp": {"url": plain.url}}})
    assert find(report, "backend llama.cpp", "FIM prompt")[1].startswith("FIM prompt: built by llama-server (/infill)")
    report = await collect({"backends": {"llama.cpp": {"url": qwen.url}}})
    level, message, _ = find(report, "backend llama.cpp", "FIM prompt")
    assert level == "ok" and message.startswith("FIM prompt: qwen (read from the served vocabulary)")
    assert "/completion" in message
    # and the probe went where completions go
    assert [p for p, _ in qwen.requests if p in ("/infill", "/completion")] == ["/completion"]


async def test_bad_options_name_their_path_and_the_backend_is_still_checked(fakes: list[FakeServer]) -> None:
    fake = FakeServer(llama(infill_stream(["n"])))
    fakes.append(fake)
    report = await collect({"n_predict": "many", "backends": {"llama.cpp": {"url": fake.url}}})
    level, message, advice = find(report, "configuration", "bad option")
    assert level == "error" and "`$.n_predict`" in message
    assert "fix the option at `$.n_predict`" in advice[0]
    assert find(report, "backend llama.cpp (active)", "reachable")[0] == "ok"
    assert report.broken


async def test_a_bad_backend_option_names_the_backend(fakes: list[FakeServer]) -> None:
    report = await collect({"backends": {"vllm": {"url": 8000}}})
    assert "`$.backends.vllm.url`" in find(report, "configuration", "bad option")[1]


async def test_a_down_backend_says_how_to_start_it(unused_port: int) -> None:
    report = await collect({"backends": {"llama.cpp": {"url": f"http://127.0.0.1:{unused_port}"}}})
    level, message, advice = find(report, "backend llama.cpp (active)", "cannot reach")
    assert level == "error" and "connection refused" in message
    assert any("local-copilot start llama.cpp" in a for a in advice)
    assert any(f"--port {unused_port}" in a for a in advice)


async def test_vllm_500_points_at_the_fastapi_pitfall(fakes: list[FakeServer]) -> None:
    fake = openai_fake((500, [b"Internal Server Error"]))
    fakes.append(fake)
    report = await collect({"backend": "vllm", "backends": {"vllm": {"url": fake.url}}})
    assert find(report, "backend vllm", "model: qwen2.5-coder-1.5b")[0] == "ok"
    assert find(report, "backend vllm", "FIM template: qwen (detected")[0] == "ok"
    level, _, advice = find(report, "backend vllm", "FIM probe failed")
    assert level == "error" and "pip install 'fastapi<0.137'" in advice[0]


async def test_a_chat_model_is_caught_by_the_probe(fakes: list[FakeServer]) -> None:
    fake = openai_fake(completion_stream(["Sure", "! Here is the code:\n```python\n", "n\n```"]), owned_by="lab")
    fakes.append(fake)
    report = await collect({"backend": "lab", "backends": {"lab": {"kind": "openai", "url": fake.url}}})
    level, message, advice = find(report, "backend lab", "FIM probe")
    assert level == "error" and "chat reply" in message
    assert any("fim_template" in a for a in advice)


async def test_an_unknown_fim_template_names_the_option(fakes: list[FakeServer]) -> None:
    fake = FakeServer(lambda path, body: (200, [json.dumps(
        {"data": [{"id": "mystery-model", "owned_by": "lab"}]}).encode()]))
    fakes.append(fake)
    report = await collect({"backend": "lab", "backends": {"lab": {"kind": "openai", "url": fake.url}}})
    level, message, advice = find(report, "backend lab", "cannot tell the FIM format")
    assert level == "error" and "fim_template" in advice[0]


async def test_security_warnings_never_show_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAB_KEY", "sk-very-secret")
    raw = {"backends": {"remote": {"kind": "openai", "url": "http://gpu.invalid:8000", "api_key_env": "LAB_KEY"},
                        "other": {"kind": "openai", "url": "http://127.0.0.1:9", "api_key_env": "NOT_SET_ANYWHERE"}}}
    report = await collect(raw, quick_timeout=0.2)
    assert find(report, "configuration", "another machine over plain http")[0] == "warn"
    level, _, advice = find(report, "configuration", "$NOT_SET_ANYWHERE")
    assert level == "warn" and "export NOT_SET_ANYWHERE=" in advice[0]
    assert find(report, "configuration", "$LAB_KEY is set")[0] == "ok"
    assert "sk-very-secret" not in msgspec.json.encode(report).decode()
    assert "sk-very-secret" not in diagnostics.render_text(report)
    # backends that are not active and do not answer are only listed
    assert any("remote: not running" in m for _, m, _ in items(report, "other backends"))


async def test_latency_and_log_sections(tmp_path: Path) -> None:
    stats = {"counters": {"requests": 10, "errors": 2}, "backends": {"llama.cpp": {
        "n": 8, "ttft_ms": {"p50": 12.0, "p95": 30.0, "p99": 41.0}, "total_ms": {"p50": 40.0, "p95": 80.0, "p99": 90.0},
        "chars_per_s": 900.0}}}
    log = tmp_path / "local_copilot.log"
    log.write_text("x" * 2048)
    report = await collect({"backends": {"llama.cpp": {"url": "http://127.0.0.1:9"}}}, stats=stats, log_file=log)
    assert find(report, "recent completions", "first token p50/p95/p99 12/30/41 ms")[0] == "ok"
    assert find(report, "recent completions", "2 of 10 requests failed")[0] == "warn"
    assert find(report, "log", str(log))[1].endswith("(2.0 KB); level warn")


def test_render_text_puts_advice_under_its_line() -> None:
    report = Report(sections=[diagnostics.Section(name="backend x", items=[
        diagnostics.Item(level="ok", message="fine"),
        diagnostics.Item(level="error", message="broken", advice=["fix it", "or this"])])])
    assert diagnostics.render_text(report).splitlines() == [
        "backend x", "  OK     fine", "  ERROR  broken", "         - fix it", "         - or this", "",
        "1 error(s), 0 warning(s)"]


def test_doctor_exit_codes(fakes: list[FakeServer], tmp_path: Path, unused_port: int,
                           capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeServer(llama(infill_stream(["n"])))
    fakes.append(fake)
    conf = tmp_path / "config.json"
    conf.write_text(json.dumps({"backends": {"llama.cpp": {"url": fake.url}}}))
    assert cli.main(["doctor", "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    assert "backend llama.cpp (active)" in out and "  OK     FIM probe: 'n'" in out
    assert cli.main(["doctor", "--config", str(conf), "--url", f"http://127.0.0.1:{unused_port}"]) == 1
    out = capsys.readouterr().out
    assert "  ERROR  cannot reach" in out and "         - start it: `local-copilot start llama.cpp`" in out
    conf.write_text(json.dumps({"n_predict": 0, "backends": {"llama.cpp": {"url": fake.url}}}))
    assert cli.main(["doctor", "--config", str(conf), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert any("$.n_predict" in i["message"] for s in doc["sections"] for i in s["items"])


def fake_exe(path: Path, script: str) -> str:
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return str(path)


async def test_vllm_install_pitfalls_from_its_own_python(tmp_path: Path, unused_port: int) -> None:
    """A vLLM without the fastapi pin next to fastapi 0.137, and a GCC newer than nvcc accepts:
    found by looking at the install, before any request fails."""
    meta = json.dumps({"vllm": "0.30.0", "dist": "vllm", "fastapi": "0.137.1", "requires": ["fastapi[standard]>=0.115"]})
    python = fake_exe(tmp_path / "python", f"case \"$2\" in *find_spec*) exit 0;; esac\necho '{meta}'\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_exe(bin_dir / "nvcc", "echo 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    fake_exe(bin_dir / "gcc", "echo 16.1.0\n")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    raw = {"backend": "vllm", "backends": {"vllm": {"url": f"http://127.0.0.1:{unused_port}",
                                                    "server": {"python": python}}}}
    report = await collect(raw, env=env)
    assert find(report, "backend vllm (active)", "vllm 0.30.0 in " + python)[0] == "ok"
    level, message, advice = find(report, "backend vllm (active)", "fastapi 0.137.1")
    assert level == "error" and "'_IncludedRouter' object has no attribute 'path'" in message
    assert advice[0] == f"{python} -m pip install 'fastapi<0.137'"
    level, message, advice = find(report, "backend vllm (active)", "gcc 16.1.0 is newer than CUDA 13.0")
    assert level == "warn" and advice[0] == "export FLASHINFER_EXTRA_CUDAFLAGS=-allow-unsupported-compiler before starting vLLM"
    assert find(report, "backend vllm (active)", "cannot reach")[0] == "error"
