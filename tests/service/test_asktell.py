"""Ask/tell over HTTP against the real server: concurrent clients, leases, a SIGKILL, bad requests.

The objective is the search tests' deterministic fake (``ProfileEvaluator``'s score as a function
of the budgets), so the service's study must match the in-process loop trial for trial.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from evolalloc.client import Client, work
from evolalloc.search import run_search
from tests.search.fakes import HEADS, LAYERS, TARGET, ProfileEvaluator, profile_error, small_config

from .conftest import ServiceProcess

PLANNED = 48  # 2 groups x 3 generations x 8 candidates
STUDY = {"geometry": {"num_layers": LAYERS, "num_kv_heads": HEADS}, "target": TARGET,
         "search_space": {"group_size": 4}, "optimizer": {"generations": 3, "seed": 7}, "expansions": [64]}


def score(budgets) -> float:
    return 1.0 - profile_error(budgets) / 2


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The in-process loop on the same settings and objective."""
    run_dir = tmp_path_factory.mktemp("local") / "run"
    return run_search(run_dir, ProfileEvaluator(), small_config(run_dir), progress=False)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    service = ServiceProcess(tmp_path_factory.mktemp("asktell") / "runs", max_jobs=0).start()
    yield service
    service.stop()


def run_clients(url: str, study_id: int, n: int, evaluate=score, **kwargs) -> list[list[tuple]]:
    """``n`` threads, each its own client, working until the study ends; what each evaluated."""
    seen: list[list[tuple]] = [[] for _ in range(n)]

    def one(i):
        client = Client(url)
        work(client, study_id, f"client-{i}", evaluate,
             on_trial=lambda trial, reply: seen[i].append((trial["id"], reply["duplicate"])), **kwargs)
        client.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return seen


def assert_same_as_local(client: Client, study_id: int, local) -> dict:
    study = client.study(study_id)
    assert study["status"] == "finished"
    assert study["best"]["budgets"] == local.best_budgets.tolist()
    assert study["best"]["fitness"] == local.best_fitness
    trials = {(t["group"], t["generation"], t["candidate"]): (t["budgets"], t["fitness"])
              for t in client.study_trials(study_id)}
    assert trials == {r.key: (r.budgets, r.fitness) for r in local.history}
    return study


def test_eight_concurrent_clients_finish_a_study_with_each_candidate_evaluated_once_and_the_local_result(service,
                                                                                                         local):
    client = Client(service.url)
    study = client.create_study({**STUDY, "name": "eight"})
    seen = run_clients(service.url, study["id"], 8)
    evaluated = [trial_id for per_client in seen for trial_id, _ in per_client]
    assert len(evaluated) == PLANNED and len(set(evaluated)) == PLANNED  # exactly once each
    assert sum(1 for per_client in seen if per_client) > 1  # the work was really shared
    finished = assert_same_as_local(client, study["id"], local)
    assert (finished["reissues"], finished["duplicates"], finished["evaluations_done"]) == (0, 0, PLANNED)


def test_the_finished_study_registers_its_profile_and_expansions(service, local):
    client = Client(service.url)
    study = client.create_study({**STUDY, "name": "registered"})
    run_clients(service.url, study["id"], 2)
    ids = client.study(study["id"])["profile_ids"]
    assert len(ids) == 2
    profiles = {p["id"]: p for p in client.profiles()}
    assert [profiles[i]["target"] for i in ids] == [TARGET, 64.0]
    assert profiles[ids[0]]["fitness"] == local.best_fitness
    document = client.profile(ids[0])
    budgets = np.array(__import__("json").loads(document)["budgets"])
    assert budgets.sum() == TARGET * LAYERS * HEADS  # completed to the exact total, as the pipeline ships it


def test_an_expired_lease_goes_to_another_client_and_the_late_result_is_counted_once(service, local):
    client = Client(service.url)
    study = client.create_study({**STUDY, "name": "leases", "lease_seconds": 2.0})
    slow = client.suggest(study["id"], "slow")["trial"]  # a slow client sits on one trial past its lease
    seen: list = []
    others = threading.Thread(target=lambda: seen.extend(run_clients(service.url, study["id"], 4)))
    others.start()
    deadline = time.monotonic() + 60
    while client.study(study["id"])["reissues"] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    late = client.complete(slow["id"], "slow", score(np.array(slow["budgets"])))  # after another client got it
    others.join(timeout=300)
    finished = assert_same_as_local(client, study["id"], local)
    evaluations = 1 + sum(len(per_client) for per_client in seen)
    # Every re-issue costs exactly one extra evaluation, ignored as a duplicate; nothing else is repeated.
    assert finished["reissues"] >= 1
    assert finished["duplicates"] == finished["reissues"]
    assert evaluations == PLANNED + finished["duplicates"]
    assert finished["evaluations_done"] == PLANNED
    assert set(late) == {"accepted", "duplicate", "trial"}  # the late result is answered, either way


def test_a_client_asking_again_gets_the_same_trial_and_a_drained_generation_says_wait(service):
    client = Client(service.url)
    study = client.create_study({**STUDY, "name": "barrier"})
    first = client.suggest(study["id"], "a")
    assert client.suggest(study["id"], "a")["trial"]["id"] == first["trial"]["id"]
    ids = {client.suggest(study["id"], f"b{i}")["trial"]["id"] for i in range(7)}
    assert len(ids | {first["trial"]["id"]}) == 8  # the whole generation is out
    response = client.http.post(f"/studies/{study['id']}/suggest", json={"client_id": "late"})
    assert response.status_code == 200 and response.json()["status"] == "wait"
    assert int(response.headers["Retry-After"]) >= 1
    assert client.study(study["id"])["evaluations_done"] == 0


def test_sigkill_between_suggest_and_complete_then_restart_keeps_outstanding_trials_and_the_result(tmp_path, local):
    service = ServiceProcess(tmp_path / "runs", max_jobs=0).start()
    try:
        client = Client(service.url)
        study = client.create_study({**STUDY, "name": "killed"})
        work(client, study["id"], "early", score, max_trials=11)  # into the second generation
        held = [client.suggest(study["id"], f"holder-{i}")["trial"] for i in range(3)]
        service.kill()
        service.start()
        client = Client(service.url)
        again = client.suggest(study["id"], "holder-0")["trial"]
        assert again["id"] == held[0]["id"] and again["budgets"] == held[0]["budgets"]
        assert again["lease"] == held[0]["lease"]  # leases outlive a restart
        for i, trial in enumerate(held):  # a new client: the leases are the ones handed out before the kill
            reply = client.complete(trial["id"], f"holder-{i}", score(np.array(trial["budgets"])), lease=trial["lease"])
            assert reply["accepted"]
        run_clients(service.url, study["id"], 4)
        finished = assert_same_as_local(client, study["id"], local)
        assert (finished["evaluations_done"], finished["duplicates"]) == (PLANNED, 0)
    finally:
        service.stop()


def snapshot(client: Client, study_id: int):
    study = client.study(study_id)
    return study, client.study_trials(study_id)


@pytest.mark.parametrize("path, body, status, words", [
    ("/studies/999/suggest", {"client_id": "x"}, 404, "no study 999"),
    ("/trials/999999/complete", {"client_id": "x", "task_score": 0.5}, 404, "no trial"),
    ("{trial}/complete", {"client_id": "intruder", "task_score": 0.5}, 403, "not issued to client 'intruder'"),
    ("{trial}/complete", {"client_id": "a", "task_score": "0.5"}, 422, "task_score"),
    ("{trial}/complete", {"client_id": "a", "task_score": True}, 422, "task_score"),
    ("{trial}/complete", {"client_id": "a", "task_score": None}, 422, "task_score"),
    ("{trial}/complete", {"client_id": "a", "task_score": 0.5, "budgets": [[32, 32]] * 4}, 422,
     "8 layers x 2 KV heads"),
    ("{trial}/complete", {"client_id": "a", "task_score": 0.5, "budgets": [[1, 1]] * 8}, 409, "not trial"),
    ("{trial}/complete", {"client_id": "a", "task_score": 0.5, "extra": 1}, 422, "extra"),
    ("{trial}/fail", {"client_id": "a"}, 422, "error"),
    ("{trial}/complete", {"client_id": "a", "task_score": 0.5, "lease": "forged"}, 403, "lease"),
    ("{trial}/complete", {"client_id": "a", "task_score": 0.5, "lease": None}, 422, "lease"),
    ("{trial}/fail", {"client_id": "a", "error": "boom", "lease": "0" * 32}, 403, "lease"),
    ("/studies/{study}/suggest", {}, 422, "client_id"),
])
def test_a_bad_request_is_a_4xx_with_a_clear_json_message_and_changes_nothing(service, path, body, status, words):
    client = Client(service.url)
    study = client.create_study({**STUDY, "name": "bad"})
    trial = client.suggest(study["id"], "a")["trial"]
    before = snapshot(client, study["id"])
    url = path.format(trial=f"/trials/{trial['id']}", study=study["id"])
    if url.startswith("/trials/"):
        body = {"lease": trial["lease"], **body}  # the holder's lease unless the case says otherwise
    response = client.http.post(url, json=body)
    assert response.status_code == status, response.text
    assert words in response.json()["error"]
    assert snapshot(client, study["id"]) == before


@pytest.mark.parametrize("raw", ['{"client_id": "a", "lease": "%s", "task_score": NaN}',
                                 '{"client_id": "a", "lease": "%s", "task_score": Infinity}',
                                 '{"client_id": "a", "lease": "%s", "task_score": -Infinity}'])
def test_a_non_finite_score_is_a_422_and_changes_nothing(service, raw):
    client = Client(service.url)
    study = client.create_study({**STUDY, "name": "nan"})
    trial = client.suggest(study["id"], "a")["trial"]
    before = snapshot(client, study["id"])
    response = client.http.post(f"/trials/{trial['id']}/complete", content=raw % trial["lease"],
                                headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert "task_score" in response.json()["error"]
    assert snapshot(client, study["id"]) == before


@pytest.mark.parametrize("body, field", [
    ({**STUDY, "model": {"spec": "/no/such/model"}}, "model"),
    ({k: v for k, v in STUDY.items() if k != "geometry"}, "model"),
    ({**STUDY, "target": "lots"}, "target"),
    ({**STUDY, "optimizer": {"name": "cmaa"}}, "optimizer"),
    ({**STUDY, "optimizer": {"name": "random", "options": {"nonsense": 1}}}, "optimizer.options"),
    ({**STUDY, "search_space": {"group_size": 4, "colour": "red"}}, "search_space.colour"),
])
def test_a_bad_study_is_a_422_naming_the_field_and_creates_nothing(service, body, field):
    client = Client(service.url)
    before = client.studies()
    response = client.http.post("/studies", json=body)
    assert response.status_code == 422, response.text
    assert response.json().get("field", "").startswith(field), response.json()
    assert client.studies() == before


def test_a_failed_trial_is_stored_as_fail_without_a_score(service):
    client = Client(service.url)
    study = client.create_study({**STUDY, "name": "fails"})
    trial = client.suggest(study["id"], "a")["trial"]
    reply = client.fail(trial["id"], "a", "CUDA out of memory")
    assert reply["trial"]["state"] == "FAIL" and reply["trial"]["fitness"] is None
    assert client.fail(trial["id"], "a", "again")["duplicate"] is True
    assert client.complete(trial["id"], "a", 0.9)["duplicate"] is True  # a FAIL is never overwritten by a score
    assert client.study(study["id"])["failures"] == 1


def test_a_study_reads_its_geometry_from_a_model_folder(service, tiny_model_dir):
    client = Client(service.url)
    study = client.create_study({"model": {"spec": str(tiny_model_dir)}, "target": 24,
                                 "search_space": {"group_size": 2}, "optimizer": {"generations": 1}})
    assert study["spec"]["geometry"]["num_layers"] == 4 and study["spec"]["geometry"]["num_kv_heads"] == 2
    trial = client.suggest(study["id"], "a")["trial"]
    assert np.array(trial["budgets"]).shape == (4, 2)


def test_a_study_reads_the_bundled_models_geometry_without_loading_it_in_the_http_process(service):
    study = Client(service.url).create_study({"model": {"spec": "bundled:smollm2-135m-instruct"}, "target": 128})
    geometry = study["spec"]["geometry"]
    assert (geometry["num_layers"], geometry["num_kv_heads"]) == (30, 3)


def test_studies_never_import_torch_in_the_http_process_and_are_in_the_openapi_schema(service, tiny_model_dir):
    from pathlib import Path

    from .test_api import _maps_of_a_torch_process

    client = Client(service.url)
    study = client.create_study({"model": {"spec": str(tiny_model_dir)}, "target": 24,
                                 "search_space": {"group_size": 2},
                                 "optimizer": {"generations": 1}})
    run_clients(service.url, study["id"], 2, evaluate=lambda b: 1.0 - abs(float(b.mean()) - 24) / 100)
    finished = client.study(study["id"])  # suggested, completed, told, profile registered
    assert finished["status"] == "finished" and finished["failures"] == 0 and len(finished["profile_ids"]) == 1
    maps = Path(f"/proc/{service.process.pid}/maps").read_text()
    assert "libtorch" not in maps and "libtorch" in _maps_of_a_torch_process()
    paths = client.http.get("/openapi.json").json()["paths"]
    assert {"/studies", "/studies/{study_id}", "/studies/{study_id}/suggest", "/trials/{trial_id}/complete",
            "/trials/{trial_id}/fail"} <= set(paths)


def test_a_head_group_study_matches_the_local_loop_and_registers_a_head_profile(service, tmp_path):
    run_dir = tmp_path / "heads"
    local = run_search(run_dir, ProfileEvaluator(), small_config(run_dir, search_space="head_groups"), progress=False)
    client = Client(service.url)
    study = client.create_study({**STUDY, "name": "heads", "search_space": {"name": "head_groups", "group_size": 4}})
    run_clients(service.url, study["id"], 3)
    assert_same_as_local(client, study["id"], local)
    profile = {p["id"]: p for p in client.profiles()}[client.study(study["id"])["profile_ids"][0]]
    assert profile["granularity"] == "head"


def test_a_study_of_two_passes_matches_the_local_loop_of_two_passes(service, tmp_path):
    run_dir = tmp_path / "passes"
    local = run_search(run_dir, ProfileEvaluator(), small_config(run_dir, passes=2), progress=False)
    client = Client(service.url)
    study = client.create_study({**STUDY, "name": "passes", "optimizer": {**STUDY["optimizer"], "passes": 2}})
    assert study["evaluations_planned"] == 2 * PLANNED
    run_clients(service.url, study["id"], 3)
    assert_same_as_local(client, study["id"], local)
    profile = __import__("json").loads(client.profile(client.study(study["id"])["profile_ids"][0]))
    assert profile["provenance"]["passes"] == 2


def test_an_unknown_search_space_is_a_422_naming_it(service):
    response = Client(service.url).http.post("/studies", json={**STUDY, "search_space": {"name": "layer_grups"}})
    assert response.status_code == 422
    assert response.json()["field"] == "search_space" and "layer_groups" in response.json()["error"]


def test_with_a_token_every_study_write_needs_it(tmp_path):
    from .conftest import TOKEN

    service = ServiceProcess(tmp_path / "runs", max_jobs=0, token=TOKEN).start()
    try:
        anonymous = Client(service.url)
        assert anonymous.http.post("/studies", json=STUDY).status_code == 401
        client = Client(service.url, token=TOKEN)
        study = client.create_study(STUDY)
        assert anonymous.http.post(f"/studies/{study['id']}/suggest", json={"client_id": "a"}).status_code == 401
        trial = client.suggest(study["id"], "a")["trial"]
        assert anonymous.http.post(f"/trials/{trial['id']}/complete", json={"client_id": "a", "lease": trial["lease"],
                                                                            "task_score": 0.5}).status_code == 401
        assert anonymous.study(study["id"])["evaluations_done"] == 0  # reads stay open
        assert client.complete(trial["id"], "a", 0.5)["accepted"]
    finally:
        service.stop()
