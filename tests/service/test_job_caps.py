"""A job's cells are capped at submission (issue 20's leftover): the service reads the recipe's model
geometry from its config (in the validator helper: no weights, no torch in the HTTP process) and
refuses a model with more cells than it searches, or a population x cells too large to store,
before any job exists. A model inside the caps is still queued."""

from __future__ import annotations

import json

import pytest

from evolalloc.client import Client

from .conftest import ServiceProcess


def config_only_model(folder, layers: int, kv_heads: int):
    """A model folder with a config.json and no weights: the submission must not need them."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": layers,
        "num_attention_heads": kv_heads, "num_key_value_heads": kv_heads, "hidden_size": 64 * kv_heads,
        "intermediate_size": 64, "max_position_embeddings": 4096, "vocab_size": 32000}))
    return folder


@pytest.fixture(scope="module")
def service(tmp_path_factory):  # its model root is the session's temp folder, which holds each test's tmp_path
    service = ServiceProcess(tmp_path_factory.mktemp("caps") / "runs", max_jobs=0).start()
    yield service
    service.stop()


def submit(service, model, extra: str = ""):
    recipe = (f"name: caps\nmodel: {{spec: {model}}}\ntask: {{name: passkey, "
              f"context_tokens: 1000}}\nbudget: {{target: 64}}\n{extra}")
    return Client(service.url).http.post("/jobs", content=recipe, headers={"Content-Type": "application/yaml"})


@pytest.mark.parametrize("layers, heads, extra, field, phrase", [
    (2048, 64, "", "model.spec", "131072 cells"),  # 2048 x 64 > 65 536
    (1024, 32, "optimizer: {popsize: 40}\n", "optimizer.popsize", "40 candidates x 32768 cells"),
])
def test_a_job_whose_model_is_too_big_to_search_is_refused_at_submission(tmp_path, service, layers, heads, extra, field,
                                                                         phrase):
    model = config_only_model(tmp_path / "big", layers, heads)
    response = submit(service, model, extra)
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["field"] == field and phrase in body["error"] and "\n" not in body["error"], body
    assert Client(service.url).jobs() == []  # nothing queued


def test_a_model_inside_the_caps_is_queued_from_its_config_alone(tmp_path, service):
    model = config_only_model(tmp_path / "small", 32, 8)
    response = submit(service, model)
    assert response.status_code == 201, response.text
    assert Client(service.url).jobs()[0]["status"] == "queued"
