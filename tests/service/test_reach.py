"""A submitted recipe reaches only what the operator allows: data and model folders, its own
run folder's trial store, the service's Ray. Every refusal is a 422 naming the field, writes
nothing, and the service keeps serving."""

from __future__ import annotations

import pytest
import yaml

from .conftest import ServiceProcess, tiny_recipe_text

WORDS = " ".join(f"word{i}" for i in range(400))


@pytest.fixture(scope="module")
def confined(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    (data / "books").mkdir()
    (data / "books" / "one.txt").write_text(WORDS, encoding="utf-8")
    (data / "escape").symlink_to("/etc")  # a link inside the root that points out of it
    service = ServiceProcess(tmp_path_factory.mktemp("reach") / "runs", max_jobs=0,
                             extra=(f"--data-root={data}",)).start()
    yield service, data
    service.stop()


def niah(haystack_dir: str, **changes) -> dict:
    return {"task": {"name": "niah", "params": {"haystack_dir": haystack_dir}, "context_tokens": 200},
            "budget": {"target": 24}, **changes}


def refused(service: ServiceProcess, data: dict, field: str) -> str:
    """POST the recipe; assert a 422 naming ``field``, nothing written, the service still up."""
    with service.client() as http:
        before = http.get("/jobs").json()["jobs"]
        response = http.post("/jobs", json=data)
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["field"] == field and field in body["error"], body
        assert "\n" not in body["error"]
        assert http.get("/jobs").json()["jobs"] == before
        assert http.get("/health").json()["status"] == "ok"
    assert [p.name for p in service.runs_dir.iterdir()] == [".service"]
    return body["error"]


@pytest.mark.parametrize("path", ["/etc", "/no/such/folder", "~/books", "books", "{data}/escape", "{data}/../"])
def test_a_task_file_parameter_outside_the_data_roots_is_refused(confined, path):
    service, data = confined
    refused(service, niah(path.format(data=data)), "task.params.haystack_dir")


def test_the_refusal_does_not_say_what_is_at_the_path(confined):
    service, _ = confined
    existing = refused(service, niah("/etc"), "task.params.haystack_dir")
    missing = refused(service, niah("/nothing-here"), "task.params.haystack_dir")
    assert existing.replace("'/etc'", "X") == missing.replace("'/nothing-here'", "X")


def test_a_path_in_a_list_task_or_a_scorer_parameter_is_checked_too(confined):
    service, data = confined
    two = {"tasks": [{"name": "passkey", "context_tokens": 200},
                     {"name": "longbench", "params": {"data_file": "/etc/passwd"}, "context_tokens": 200}],
           "budget": {"target": 24}}
    refused(service, two, "tasks[1].params.data_file")
    refused(service, {**niah(f"{data}/books"), "scorer": {"name": "snapkv", "params": {"checkpoint": "/etc/shadow"}}},
            "scorer.params.checkpoint")


def test_a_methods_checkpoint_outside_the_roots_is_refused_alike_whether_or_not_it_exists(confined):
    service, data = confined
    refusals = [refused(service, {**niah(f"{data}/books"), "checkpoints": {"retention-gates": path}},
                        "checkpoints.retention-gates") for path in ("/etc/passwd", "/nothing-here", "relative.pt")]
    assert refusals[0].replace("'/etc/passwd'", "X") == refusals[1].replace("'/nothing-here'", "X")


def test_a_start_file_outside_the_roots_is_refused_alike_whether_or_not_it_exists(confined):
    service, data = confined
    refusals = [refused(service, {**niah(f"{data}/books"), "optimizer": {"start": f"best,{path}"}}, "optimizer.start")
                for path in ("/etc/x.json", "/nothing-here.json", "runs/a/allocation-c24.json")]
    assert refusals[0].replace("'/etc/x.json'", "X") == refusals[1].replace("'/nothing-here.json'", "X")


def test_a_file_inside_a_data_root_is_accepted(confined, tiny_model_dir):
    service, data = confined
    recipe = yaml.safe_load(tiny_recipe_text(tiny_model_dir, "inside"))
    recipe["task"] = niah(f"{data}/books")["task"]
    with service.client() as http:
        response = http.post("/jobs", json=recipe)
        assert response.status_code == 201, response.text
        assert response.json()["status"] == "queued"


@pytest.mark.parametrize("spec", ["/etc", "/usr/lib", "~/.cache/evolalloc", "relative/model"])
def test_a_model_outside_the_model_roots_is_refused(confined, spec):
    service, data = confined
    refused(service, niah(f"{data}/books", model={"spec": spec}), "model.spec")


def test_a_study_model_outside_the_model_roots_is_refused(confined):
    service, _ = confined
    with service.client() as http:
        response = http.post("/studies", json={"model": {"spec": "/etc"}, "target": 24})
        assert response.status_code == 422, response.text
        assert response.json()["field"] == "model.spec"
        assert http.get("/studies").json()["studies"] == []


@pytest.mark.parametrize("address", ["ray://attacker.example:10001", "auto", "127.0.0.1:6379"])
def test_a_recipe_cannot_choose_where_ray_runs(confined, address):
    service, data = confined
    refused(service, niah(f"{data}/books", engine={"kind": "ray", "address": address}), "engine.address")


def test_a_ray_job_gets_the_services_address(confined, tiny_model_dir):
    service, _ = confined
    recipe = yaml.safe_load(tiny_recipe_text(tiny_model_dir, "on-ray", engine={"kind": "ray", "workers": 1}))
    with service.client() as http:
        job = http.post("/jobs", json=recipe).json()
        assert http.get(f"/jobs/{job['id']}").json()["recipe"]["engine"]["address"] == "local"


@pytest.mark.parametrize("storage", [
    "sqlite:///{runs}/.service/service.db",  # the service's own database
    "sqlite:///{runs}/other/study.db",  # another run's folder
    "sqlite://evil.example/{runs}/here/study.db",
    "sqlite:///{runs}/here/study.db?uri=true",
    "postgresql://user:secret@db.example/evolalloc",
    "journal:{runs}/../outside.log",
    "sqlite:///{runs}/here",  # the folder itself
])
def test_storage_is_only_null_or_inside_the_jobs_run_folder(confined, storage):
    service, data = confined
    runs = service.runs_dir.resolve()
    refused(service, niah(f"{data}/books", name="here", storage=storage.format(runs=runs)), "storage")


def test_storage_inside_the_jobs_run_folder_is_accepted(confined, tiny_model_dir):
    service, _ = confined
    runs = service.runs_dir.resolve()
    text = tiny_recipe_text(tiny_model_dir, "mine", storage=f"sqlite:///{runs}/mine/trials.db")
    with service.client() as http:
        assert http.post("/jobs", content=text, headers={"Content-Type": "application/yaml"}).status_code == 201
