"""`local-copilot start|stop|status`: configuration from a file and flags (no server needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from local_copilot.cli import main as cli
from local_copilot.errors import ConfigError


def args(*argv: str):  # noqa: ANN201
    return cli.build_parser().parse_args(list(argv))


def test_toml_file_with_server_options(tmp_path: Path) -> None:
    f = tmp_path / "config.toml"
    f.write_text('[backends.vllm]\nmodel = "qwen"\n[backends.vllm.server]\nmax_num_seqs = 4\npython = "/v/bin/python"\n')
    backends, options = cli.resolve_backend("vllm", cli.read_config_file(f), args("start", "vllm"))
    assert backends["vllm"].model == "qwen" and backends["vllm"].url == "http://127.0.0.1:8000"
    assert options["vllm"].max_num_seqs == 4 and options["vllm"].python == "/v/bin/python"
    assert options["llama.cpp"].parallel is None  # defaults elsewhere: llama-server's own slots


def test_flags_override_the_file(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"backends": {"llama.cpp": {"url": "http://127.0.0.1:9000", "server": {"parallel": 3}}}}))
    a = args("start", "llama.cpp", "--config", str(f), "--url", "http://127.0.0.1:9100", "--model", "/m.gguf",
             "--parallel", "4", "--cmd", "llama-server -m '/a b.gguf'", "--env", "A=1", "--extra-arg=-t",
             "--extra-arg", "2")
    backends, options = cli.resolve_backend("llama.cpp", cli.read_config_file(f), a)
    b = backends["llama.cpp"]
    assert (b.url, b.model, b.cmd) == ("http://127.0.0.1:9100", "/m.gguf", ["llama-server", "-m", "/a b.gguf"])
    assert options["llama.cpp"].parallel == 4
    assert options["llama.cpp"].env == {"A": "1"} and options["llama.cpp"].extra_args == ["-t", "2"]


def test_start_a_router_from_a_models_folder_flag() -> None:
    a = args("start", "router", "--url", "http://127.0.0.1:9200", "--models-dir", "~/models", "--model", "qwen-coder")
    backends, options = cli.resolve_backend("router", {}, a)
    assert backends["router"].model == "qwen-coder" and options["router"].models_dir == "~/models"


def test_a_new_backend_from_flags_only() -> None:
    backends, _ = cli.resolve_backend("lab", {}, args("start", "lab", "--kind", "openai", "--url",
                                                      "http://127.0.0.1:7000", "--cmd", "my-server --port 7000"))
    assert backends["lab"].kind == "openai" and backends["lab"].cmd == ["my-server", "--port", "7000"]


def test_bad_server_option_names_its_path(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"backends": {"vllm": {"server": {"max_num_seqs": "many"}}}}))
    with pytest.raises(ConfigError, match=r"\$\.backends\.vllm\.server\.max_num_seqs"):
        cli.resolve_backend("vllm", cli.read_config_file(f))


def test_errors_are_one_line_on_stderr(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli.main(["start", "nope", "--config", str(tmp_path / "missing.toml")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("local-copilot: cannot read config file") and err.count("\n") == 1


def test_status_of_nothing_running_exits_3(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from local_copilot.servers.ports import free_port

    monkeypatch.setenv("LOCAL_COPILOT_RUNTIME_DIR", str(tmp_path / "run"))
    url = f"http://127.0.0.1:{free_port()}"
    assert cli.main(["status", "llama.cpp", "--url", url]) == 3
    assert "stopped" in capsys.readouterr().out
    assert cli.main(["status", "llama.cpp", "--url", url, "--json"]) == 3
    assert json.loads(capsys.readouterr().out)[0]["state"] == "stopped"


def test_complete_reads_file_line_and_column(tmp_path: Path) -> None:
    assert cli._position("a.py") == ("a.py", None, None)
    assert cli._position("a.py:12") == ("a.py", 12, None)
    assert cli._position("dir/a.py:12:5") == ("dir/a.py", 12, 5)
    assert cli._position("-") == ("-", None, None)
    odd = tmp_path / "notes:2:3"  # an existing file whose name looks like a spot is taken whole
    odd.write_text("")
    assert cli._position(str(odd)) == (str(odd), None, None)
    assert cli._position(f"{odd}:4") == (str(odd), 4, None)


def test_an_options_file_error_names_the_format_it_was_read_as_and_the_line(tmp_path: Path) -> None:
    yaml = tmp_path / "x.yaml"
    yaml.write_text("backend: vllm\n")
    with pytest.raises(ConfigError, match=r"x\.yaml is not valid JSON \(a file not named \.toml is read as JSON\): "
                                          r"Expecting value: line 1 column 1"):
        cli.read_config_file(yaml)
    toml = tmp_path / "config.toml"
    toml.write_text("n_predict = 8\n[backends\n")
    with pytest.raises(ConfigError, match=r"config\.toml is not valid TOML: .*line 2"):
        cli.read_config_file(toml)


def test_a_column_inside_a_character_of_several_bytes_is_its_start() -> None:
    from local_copilot.cli.oneshot import cursor_at

    line = "s = '\u00e9\u20ac\U0001f600x'"  # é: 2 bytes, €: 3, 😀: 4, from byte 5 on
    starts = {6: 5, 7: 5, 8: 7, 9: 7, 10: 7, 11: 10, 12: 10, 13: 10, 14: 10, 15: 14}  # COL -> byte
    for col, byte in starts.items():
        assert cursor_at([line], 1, col) == (0, byte), col
    assert cursor_at(["\u00e9"], 1, 2) == (0, 0) and cursor_at(["\u00e9"], 1, 3) == (0, 2)
