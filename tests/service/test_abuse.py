"""One request cannot exhaust or break the service, nor forge a result: sizes are capped, optimizer
options are typed, reports are finite, documents are bounded, a result needs its lease.

Each refusal is a 4xx with one JSON line naming the field, writes nothing, and the service keeps
serving (the study in use still takes a good result afterwards).
"""

from __future__ import annotations

import time

import pytest

from evolalloc.client import Client

from .conftest import ServiceProcess

STUDY = {"geometry": {"num_layers": 4, "num_kv_heads": 2}, "target": 32, "search_space": {"group_size": 2},
         "optimizer": {"generations": 1}}
RECIPE = "task: {name: passkey}\nbudget: {target: 64}\n"


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    service = ServiceProcess(tmp_path_factory.mktemp("abuse") / "runs", max_jobs=0).start()
    yield service
    service.stop()


def state(client: Client) -> tuple:
    """Everything a refused request must leave as it was."""
    studies = client.studies()
    trials = [client.study_trials(s["id"]) for s in studies]
    return studies, trials, client.http.get("/jobs").json(), client.profiles()


def assert_refused(client: Client, response, status: int, field: str, before: tuple) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert field in body["error"] and "\n" not in body["error"] and "Traceback" not in body["error"], body
    assert state(client) == before
    assert client.http.get("/health").json()["status"] == "ok"


@pytest.mark.parametrize("change, field", [
    ({"geometry": {"num_layers": 4096, "num_kv_heads": 4096}}, "geometry"),
    ({"geometry": {"num_layers": 1024, "num_kv_heads": 32}, "optimizer": {"popsize": 1000}}, "optimizer.popsize"),
    ({"search_space": {"group_size": 100000}}, "search_space.group_size"),
    ({"optimizer": {"options": {"maxiter": "9**9**9**9"}}}, "optimizer.options"),
    ({"optimizer": {"options": {"tolfun": "__import__('os').getpid()"}}}, "optimizer.options"),
    ({"expansions": [16]}, "expansions"),  # below the target: a profile is only carried upwards
    ({"expansions": [1e308]}, "expansions"),  # would fail at the study's last result
    ({"target": 1e300}, "target"),  # budgets wrapped around to 1
    ({"search_space": {"group_size": 2, "max_budget": 10**400}}, "search_space.max_budget"),
    ({"search_space": {"group_size": 2, "ratio_bounds": [0, 1e308]}}, "search_space.ratio_bounds"),
    ({"optimizer": {"seed": 10**400}}, "optimizer.seed"),
    ({"geometry": {"num_layers": 4, "num_kv_heads": 2, "head_dim": 10**400}}, "geometry.head_dim"),
])
def test_an_oversized_or_unsafe_study_is_refused_quickly(service, change, field):
    client = Client(service.url)
    before = state(client)
    started = time.monotonic()
    response = client.http.post("/studies", json={**STUDY, **change})
    assert time.monotonic() - started < 20  # not the seconds (or forever) of an evaluated expression
    assert_refused(client, response, 422, field, before)


@pytest.mark.parametrize("report, field", [
    ({"task_score": 1.7e308}, "task_score"),  # finite, but its fitness overflows to infinity
    ({"task_score": int("9" * 400)}, "task_score"),
    ({"task_score": 0.5, "metrics": {"loss": float("nan")}}, "metrics"),
    ({"task_score": 0.5, "metrics": {"tokens": int("9" * 400)}}, "metrics"),
    ({"task_score": 0.5, "seconds": float("inf")}, "seconds"),
])
def test_a_report_that_is_not_finite_everywhere_is_refused_and_the_study_goes_on(service, report, field):
    client = Client(service.url)
    study = client.create_study({**STUDY, "name": "finite"})
    trial = client.suggest(study["id"], "a")["trial"]
    before = state(client)
    import json

    raw = json.dumps({"client_id": "a", "lease": trial["lease"], **report})  # NaN/Infinity as Python writes them
    response = client.http.post(f"/trials/{trial['id']}/complete", content=raw,
                                headers={"Content-Type": "application/json"})
    assert_refused(client, response, 422, field, before)
    assert client.complete(trial["id"], "a", 0.5)["accepted"]  # the trial still takes a good result
    assert client.study_trials(study["id"])  # and the listing still reads


def test_a_lease_is_only_in_the_suggest_answer_and_a_forged_one_is_refused(service):
    client = Client(service.url)
    study = client.create_study({**STUDY, "name": "lease"})
    trial = client.suggest(study["id"], "holder")["trial"]
    assert client.suggest(study["id"], "holder")["trial"]["lease"] == trial["lease"]  # asking again: the same
    listed = client.study_trials(study["id"])
    assert all("lease" not in t for t in listed) and trial["lease"] not in str(listed)
    assert trial["lease"] not in str(client.study(study["id"]))
    before = state(client)
    # What the listing shows (id and holder) is not enough to report a result.
    other = Client(service.url)
    forged = other.http.post(f"/trials/{trial['id']}/complete", json={"client_id": "holder", "lease": "0" * 32,
                                                                       "task_score": 1.0})
    assert_refused(client, forged, 403, "lease", before)
    assert client.complete(trial["id"], "holder", 0.5)["accepted"]


@pytest.mark.parametrize("change, field", [
    ("optimizer: {options: {maxiter: '9**9**9**9'}}", "optimizer.options"),
    ("optimizer: {popsize: 100000}", "optimizer.popsize"),
    ("search_space: {group_size: 100000}", "search_space.group_size"),
])
def test_an_unsafe_or_oversized_job_is_refused_at_submission(service, change, field):
    client = Client(service.url)
    before = state(client)
    response = client.http.post("/jobs", content=RECIPE + change + "\n", headers={"Content-Type": "application/yaml"})
    assert_refused(client, response, 422, field, before)
    assert response.json()["field"] == field


def test_yaml_aliases_are_refused_before_they_expand(service):
    client = Client(service.url)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" \
           "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n" + RECIPE
    before = state(client)
    response = client.http.post("/jobs", content=bomb, headers={"Content-Type": "application/yaml"})
    assert_refused(client, response, 422, "alias", before)


@pytest.mark.parametrize("kind, body", [
    ("application/yaml", "task: {name: passkey, params: {x: " + "[" * 5000 + "]" * 5000 + "}}\nbudget: {target: 64}\n"),
    ("application/json", '{"task": {"name": "passkey", "params": {"x": ' + "[" * 100000 + "]" * 100000 + "}}}"),
    ("application/json", '{"task": {"name": "passkey", "params": {"x": ' + "[" * 50 + "]" * 50 + "}}}"),
    ("application/yaml",
     "task: {name: passkey, params: {x: [" + ", ".join(["1"] * 30000) + "]}}\nbudget: {target: 64}\n"),
])
def test_a_deep_or_huge_document_is_a_4xx_not_a_500(service, kind, body):
    client = Client(service.url)
    before = state(client)
    response = client.http.post("/jobs", content=body, headers={"Content-Type": kind})
    assert_refused(client, response, 422, "the document is", before)


def test_a_deeply_nested_profile_upload_or_study_is_a_4xx(service):
    client = Client(service.url)
    before = state(client)
    deep = "[" * 100000 + "]" * 100000
    response = client.http.post("/profiles", content=deep, headers={"Content-Type": "application/json"})
    assert 400 <= response.status_code < 500, response.text
    assert state(client) == before
    response = client.http.post("/studies", content='{"optimizer": {"options": {"x": ' + deep + "}}}",
                                headers={"Content-Type": "application/json"})
    assert 400 <= response.status_code < 500, response.text
    assert state(client) == before
