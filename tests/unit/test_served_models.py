"""What is said of the models a server lists (backends/models.py): pure parts. Listing them
from a real router-mode llama-server is tests/integration/test_router.py's."""

from __future__ import annotations

from local_copilot.backends.models import DECODER, Listed, _state, describe, model_problem


def test_a_routers_states_are_shown_beside_the_ids_and_a_failed_load_says_failed() -> None:
    # the shapes llama.cpp's server README gives for GET /models
    payload = b"""{"data": [
        {"id": "qwen-coder", "status": {"value": "loaded", "args": ["llama-server"]}},
        {"id": "zeta", "status": {"value": "loading"}},
        {"id": "gemma", "status": {"value": "unloaded", "failed": true, "exit_code": 1}},
        {"id": "plain"}]}"""
    models = [Listed(m.id, _state(m)) for m in DECODER.decode(payload).data]
    assert describe(models) == "qwen-coder (loaded), zeta (loading), gemma (failed), plain"


def test_an_unknown_model_names_those_there_are() -> None:
    models = [Listed("qwen-coder", "loaded"), Listed("zeta", "unloaded")]
    assert model_problem("team", "http://h:8012", "zeta", models) is None
    assert model_problem("team", "http://h:8012", "qwen", models) == (
        "team: the server at http://h:8012 has no model 'qwen'; choose one of: qwen-coder (loaded), zeta (unloaded)")


def test_a_server_that_lists_none_says_where_a_model_is_chosen_per_request() -> None:
    said = model_problem("local", "http://127.0.0.1:8012", "zeta", [])
    assert said is not None and "lists no models" in said and "router-mode llama-server (--models-dir)" in said


def test_a_llama_swap_model_id_keeps_its_slashes_in_the_upstream_path() -> None:
    from local_copilot.backends.swap import upstream

    # llama-swap matches /upstream/ path segments against its model ids, slashes included
    assert upstream("qwen-coder") == "/upstream/qwen-coder"
    assert upstream("ggml-org/gemma 3:Q4") == "/upstream/ggml-org/gemma%203%3AQ4"
