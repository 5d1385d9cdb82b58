"""The operator's limits, checked at submission (issue 34): a recipe asking for a billion held-out
instances or a billion generations was a 201 and held the one-job queue; now it is a 422 naming the
field, its value and the limit, and nothing is queued. ``GET /limits`` shows them; a queued job shows
its planned evaluations and an estimated duration from the start; the queue is bounded (429)."""

from __future__ import annotations

import httpx
import pytest

from .conftest import TOKEN, ServiceProcess, tiny_recipe_text


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    service = ServiceProcess(tmp_path_factory.mktemp("limits") / "runs", max_jobs=0,
                             extra=("--max-evaluations=100", "--max-queued=3", "--seconds-per-answer=0.5")).start()
    yield service
    service.stop()


@pytest.fixture(scope="module")
def default_service(tmp_path_factory):
    """A service started as the issue's probes found it: no limit option given."""
    service = ServiceProcess(tmp_path_factory.mktemp("defaults") / "runs", max_jobs=0).start()
    yield service
    service.stop()


def submit(http: httpx.Client, model, name: str, **changes) -> httpx.Response:
    return http.post("/jobs", content=tiny_recipe_text(model, name, **changes),
                     headers={"Content-Type": "application/yaml"})


def tiny_task(**splits) -> dict:
    task = {"name": "passkey", "context_tokens": 200, "search": {"n": 2}, "heldout": {"n": 3}}
    return {**task, **splits}


@pytest.mark.parametrize("changes, field, value, limit", [
    ({"task": tiny_task(heldout={"n": 1_000_000_000})}, "task.heldout.n", "1000000000", "1000"),
    ({"task": tiny_task(search={"n": 5000})}, "task.search.n", "5000", "1000"),
    ({"task": tiny_task(search={"n": 8, "curate": {"full_cache_solves": True, "draw": 10**6}})},
     "task.search.curate.draw", "1000000", "2000"),
    # planned: the start's 3 profiles (uniform, PyramidKV, LU-KV) + 2 groups x M generations x 6
    ({"optimizer": {"name": "cma", "generations_per_group": 1_000_000_000}}, "optimizer.generations_per_group",
     "12000000003 evaluations", "100"),
    ({"optimizer": {"name": "cma", "generations_per_group": 9}}, "optimizer.generations_per_group", "111 evaluations",
     "100"),
    ({"optimizer": {"name": "cma", "max_generations_per_group": 9}}, "optimizer.max_generations_per_group",
     "111 evaluations", "100"),
    # one pass (3 + 2 x 5 x 6 = 63) would fit: the passes are what is over
    ({"optimizer": {"name": "cma", "generations_per_group": 5, "passes": 2}}, "optimizer.passes",
     "(3 start + 4 groups = 2 passes over 2 x 5 generations x 6 candidates) = 123 evaluations", "100"),
    ({"scorer": {"name": "gates", "train": {"steps": 10**7}}}, "scorer.train.steps", "10000000", "20000"),
    ({"budget": {"target": 24, "expansions": list(range(25, 125))}}, "budget.expansions", "101 budgets", "64"),
    ({"engine": {"kind": "local", "workers": 100_000}}, "engine.workers", "100000 workers", "32"),
])
def test_a_recipe_over_a_limit_is_a_422_naming_field_value_and_limit_and_nothing_is_queued(
        service, tiny_model_dir, changes, field, value, limit):
    with service.client() as http:
        before = http.get("/jobs").json()["jobs"]
        response = submit(http, tiny_model_dir, "too-big", **changes)
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["field"] == field, body
        assert value in body["error"] and f"limit of {limit}" in body["error"] and "serve --max-" in body["error"], body
        assert http.get("/jobs").json()["jobs"] == before


def test_get_limits_shows_the_operators_limits_and_the_queue(service):
    with service.client() as http:
        info = http.get("/limits").json()
    assert info["limits"]["max_evaluations"] == 100 and info["limits"]["max_queued"] == 3  # as serve was told
    assert info["limits"]["max_instances"] == 1000 and info["limits"]["max_job_hours"] == 24  # the defaults
    assert set(info["queue"]) >= {"queued", "max_queued", "full"}


def test_a_queued_job_shows_its_planned_evaluations_and_an_estimate_at_once(service, tiny_model_dir):
    with service.client() as http:
        job = submit(http, tiny_model_dir, "planned").json()
        http.post(f"/jobs/{job['id']}/cancel")
    # The start's 3 profiles, then 4 layers in groups of 2, one generation of 4 + floor(3 ln 2) = 6: 3 + 2 x 1 x 6.
    assert job["evaluations_planned"] == 15
    # Answers: 15 evaluations x 2 search prompts + 3 held-out prompts x (evolved + uniform) x 2 budgets = 42.
    assert job["estimated_seconds"] == 42 * 0.5


def test_the_queue_is_bounded_a_429_with_retry_after_and_cancelling_makes_room(service, tiny_model_dir):
    with service.client() as http:
        for job in http.get("/jobs", params={"status": "queued"}).json()["jobs"]:
            http.post(f"/jobs/{job['id']}/cancel")
        queued = [submit(http, tiny_model_dir, f"waits-{k}").json() for k in range(3)]
        refused = submit(http, tiny_model_dir, "one-too-many")
        assert refused.status_code == 429, refused.text
        assert refused.headers["Retry-After"].isdigit() and int(refused.headers["Retry-After"]) > 0
        assert "queue is full" in refused.json()["error"] and "--max-queued" in refused.json()["error"]
        assert http.get("/limits").json()["queue"]["full"] is True
        assert len(http.get("/jobs", params={"status": "queued"}).json()["jobs"]) == 3  # nothing added
        http.post(f"/jobs/{queued[0]['id']}/cancel")
        assert submit(http, tiny_model_dir, "fits-again").status_code == 201
        # A resume joins the queue too: refused while it is full.
        resumed = http.post(f"/jobs/{queued[0]['id']}/resume")
        assert resumed.status_code == 429 and "Retry-After" in resumed.headers
        for job in http.get("/jobs", params={"status": "queued"}).json()["jobs"]:
            http.post(f"/jobs/{job['id']}/cancel")


@pytest.mark.parametrize("changes, field", [
    ({"task": tiny_task(heldout={"n": 1_000_000_000})}, "task.heldout.n"),
    ({"optimizer": {"name": "cma", "generations_per_group": 1_000_000_000}}, "optimizer.generations_per_group"),
])
def test_the_issues_oversized_recipes_are_refused_by_the_default_limits(default_service, tiny_model_dir, changes,
                                                                        field):
    with default_service.client() as http:
        response = submit(http, tiny_model_dir, "probe", **changes)
        assert response.status_code == 422 and response.json()["field"] == field, response.text
        assert http.get("/jobs").json()["jobs"] == []


def test_sixty_submissions_at_once_queue_no_more_than_the_default_limit(default_service, tiny_model_dir):
    from concurrent.futures import ThreadPoolExecutor

    def one(k: int) -> int:
        with default_service.client() as http:
            return submit(http, tiny_model_dir, f"burst-{k}").status_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(one, range(60)))
    assert codes.count(201) == 20 and codes.count(429) == 40, codes  # serve --max-queued: 20 by default
    with default_service.client() as http:
        assert len(http.get("/jobs", params={"status": "queued"}).json()["jobs"]) == 20


def test_each_token_has_its_own_queue_limit(tmp_path, tiny_model_dir):
    service = ServiceProcess(tmp_path / "runs", max_jobs=0, token=TOKEN,
                             extra=("--max-queued=10", "--max-queued-per-token=2")).start()
    try:
        with service.client(TOKEN) as http:
            assert [submit(http, tiny_model_dir, f"mine-{k}").status_code for k in range(2)] == [201, 201]
            refused = submit(http, tiny_model_dir, "mine-2")
            assert refused.status_code == 429 and "per token" in refused.json()["error"], refused.text
            assert "Retry-After" in refused.headers
            assert http.get("/limits").json()["queue"]["queued_by_this_token"] == 2
    finally:
        service.stop()
