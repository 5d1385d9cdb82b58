"""Ask/tell studies record the scorer that ranked the tokens: a study served by ``evolalloc worker``
with a gates recipe registers profiles naming the checkpoint (path, sha256, how it was trained),
as a run's profiles do; a result ranked by another checkpoint is refused."""

from __future__ import annotations

import hashlib
import json

import pytest

from evolalloc.client import Client
from evolalloc.service.client import ServiceError
from tests.learned.test_gates_in_the_search import save_tiny_gates

from .conftest import ServiceProcess, tiny_recipe_text
from .test_asktell_worker import run_worker

SHA_A, SHA_B = "a" * 64, "b" * 64


def gates_identity(sha: str, path: str = "/somewhere/gates.pt") -> dict:
    return {"name": "gates", "params": {"checkpoint": path, "sinks": 4},
            "checkpoint": {"path": path, "sha256": sha, "format": "evolalloc-gates", "trained": {"steps": 7}}}


def test_a_study_served_by_the_worker_with_gates_records_the_checkpoint_in_its_profiles(tmp_path, tiny_model_dir):
    checkpoint = tmp_path / "gates.pt"
    save_tiny_gates(checkpoint, tiny_model_dir)
    recipe_file = tmp_path / "gates.yaml"
    recipe_file.write_text(tiny_recipe_text(tiny_model_dir, "gates",
                                            scorer={"name": "gates", "params": {"checkpoint": str(checkpoint)}},
                                            budget={"target": 24, "expansions": []},
                                            optimizer={"name": "cma", "generations_per_group": 1, "popsize": 3}))
    service = ServiceProcess(tmp_path / "runs", max_jobs=0).start()
    try:
        client = Client(service.url)
        study = client.create_study({"model": {"spec": str(tiny_model_dir)}, "target": 24, "scorer": "gates",
                                     "search_space": {"group_size": 2, "min_budget": 20},
                                     "optimizer": {"generations": 1, "popsize": 3}, "expansions": [48]})
        done = run_worker(service.url, study["id"], recipe_file, "--client-id", "w1")
        assert done.returncode == 0, done.stderr[-3000:]
        finished = client.study(study["id"])
        assert finished["status"] == "finished" and len(finished["profile_ids"]) == 2  # the profile and its expansion
        sha = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
        for profile_id in finished["profile_ids"]:
            profile = json.loads(client.profile(profile_id))
            assert profile["scorer"] == "gates" and profile["scorer_params"]["checkpoint"] == str(checkpoint)
            recorded = profile["provenance"]["scorer_checkpoint"]
            assert recorded["sha256"] == sha and recorded["path"] == str(checkpoint)
            assert recorded["trained"]["steps"] == 7 and recorded["trained"]["tasks"] == ["passkey"]
    finally:
        service.stop()


@pytest.fixture
def study_service(tmp_path):
    service = ServiceProcess(tmp_path / "runs", max_jobs=0).start()
    yield service
    service.stop()


def start_study(service, **body):
    client = Client(service.url)
    study = client.create_study({"geometry": {"num_layers": 2, "num_kv_heads": 1}, "target": 24,
                                 "search_space": {"group_size": 2}, "optimizer": {"generations": 1, "popsize": 3},
                                 **body})
    return client, study


def test_a_result_ranked_by_another_checkpoint_is_refused_and_the_first_one_is_recorded(study_service):
    client, study = start_study(study_service)
    trials = [client.suggest(study["id"], f"c{i}")["trial"] for i in range(3)]
    client.complete(trials[0]["id"], "c0", 0.5, scorer=gates_identity(SHA_A))
    # The same bytes at another path (another machine) agree; other bytes, or another scorer, do not.
    client.complete(trials[1]["id"], "c1", 0.5, scorer=gates_identity(SHA_A, "/elsewhere/gates.pt"))
    with pytest.raises(ServiceError) as refused:
        client.complete(trials[2]["id"], "c2", 0.5, scorer=gates_identity(SHA_B))
    assert refused.value.status == 409 and SHA_B[:12] in str(refused.value) and SHA_A[:12] in str(refused.value)
    with pytest.raises(ServiceError) as refused:
        client.complete(trials[2]["id"], "c2", 0.5, scorer={"name": "snapkv", "params": {"window": 8}})
    assert refused.value.status == 409
    client.complete(trials[2]["id"], "c2", 0.5, scorer=gates_identity(SHA_A))
    finished = client.study(study["id"])
    assert finished["status"] == "finished"
    profile = json.loads(client.profile(finished["profile_ids"][0]))
    assert profile["scorer"] == "gates" and profile["provenance"]["scorer_checkpoint"]["sha256"] == SHA_A
    assert profile["scorer_params"]["checkpoint"] == "/somewhere/gates.pt"  # the first result's


def test_a_study_for_one_scorer_refuses_a_result_from_another(study_service):
    client, study = start_study(study_service, scorer="learned")
    trial = client.suggest(study["id"], "c0")["trial"]
    with pytest.raises(ServiceError) as refused:
        client.complete(trial["id"], "c0", 0.5, scorer=gates_identity(SHA_A))
    assert refused.value.status == 409 and "'learned'" in str(refused.value)


def test_a_malformed_checkpoint_fingerprint_is_a_422_naming_the_field(study_service):
    client, study = start_study(study_service)
    trial = client.suggest(study["id"], "c0")["trial"]
    with pytest.raises(ServiceError) as refused:
        client.complete(trial["id"], "c0", 0.5, scorer=gates_identity("not-hex"))
    assert refused.value.status == 422 and "sha256" in str(refused.value)


def test_a_study_for_the_old_scorer_name_takes_results_under_the_current_one(study_service):
    client, study = start_study(study_service, scorer="gates")
    trials = [client.suggest(study["id"], f"c{i}")["trial"] for i in range(2)]
    client.complete(trials[0]["id"], "c0", 0.5, scorer=gates_identity(SHA_A))
    # retention-gates is gates renamed: the same scorer, the same checkpoint bytes.
    client.complete(trials[1]["id"], "c1", 0.5, scorer={**gates_identity(SHA_A), "name": "retention-gates"})
    assert client.study(study["id"])["evaluations_done"] == 2
