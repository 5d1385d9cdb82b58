"""The service's HTTP contract without running a search: validation, errors, registry, guards.

One service with ``--max-jobs 0`` (queue only) serves the module, so no model is ever loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import allocation_to_json, parse_allocation
from evolalloc.core.errors import UserError
from evolalloc.core.geometry import ModelGeometry

from .conftest import REPO, TOKEN, ServiceProcess, tiny_recipe_text

GEOMETRY = ModelGeometry(num_layers=4, num_query_heads=4, num_kv_heads=2, head_dim=16, max_positions=2048)


@pytest.fixture(scope="module")
def queue_only(tmp_path_factory):
    service = ServiceProcess(tmp_path_factory.mktemp("api") / "runs", max_jobs=0).start()
    yield service
    service.stop()


def a_profile(target=32, budgets=(40, 36, 28, 24)) -> Allocation:
    rows = np.repeat(np.array(budgets)[:, None], 2, axis=1)
    return Allocation(model="tiny", geometry=GEOMETRY, scorer="snapkv", scorer_params={"window": 8}, target=target,
                      granularity="layer", budgets=rows,
                      provenance={"method": "evolved", "task": "passkey", "fitness": 0.5})


def run_folders(service: ServiceProcess) -> list[str]:
    return sorted(p.name for p in service.runs_dir.iterdir() if p.name != ".service")


@pytest.mark.parametrize("body, field", [
    ("task: {name: passkey}\nbudget: {target: lots}\n", "budget.target"),
    ("task: {name: passkey}\nbudget: {target: 64}\noptimizer: {sigma: 0.3}\n", "optimizer.sigma"),
    ("task: {name: paskey}\nbudget: {target: 64}\n", "task.name"),
    ("task: {name: passkey}\nbudget: {target: 64}\nscorer: {name: snapkvv}\n", "scorer.name"),
    ("task: {name: passkey}\nbudget: {target: 64}\nmodel: {spec: /no/such/model}\n", "model.spec"),
    ("task: {name: passkey, context_tokens: 100000}\nbudget: {target: 64}\n", "task.context_tokens"),
    ("task: {name: passkey}\nbudget: {target: 64}\nstorage: sqlite:////tmp/elsewhere.db\n", "storage"),
    ("task: {name: passkey}\nbudget: {target: 64}\nstorage: 'journal:../../outside.log'\n", "storage"),
    ("task: {name: passkey}\nbudget: {target: 64}\nname: ../escape\n", "name"),
    ("task: {name: passkey}\n  budget: [\n", "line"),
    ("!!python/object/apply:os.system ['true']\n", "line"),
])
def test_a_malformed_recipe_is_a_422_naming_the_field_and_writes_nothing(queue_only, body, field):
    with queue_only.client() as http:
        before = http.get("/jobs").json()["jobs"]
        response = http.post("/jobs", content=body, headers={"Content-Type": "application/yaml"})
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert field in error and "Traceback" not in error
        assert http.get("/jobs").json()["jobs"] == before
    assert run_folders(queue_only) == []


def test_the_service_refuses_what_the_cli_loader_refuses_with_the_same_message(queue_only):
    from evolalloc.config.recipe import recipe_from_dict

    data = {"task": {"name": "passkey"}, "budget": {"target": 64}, "scorer": {"name": "snapkv", "params": {"windw": 3}}}
    with pytest.raises(UserError) as cli:
        recipe_from_dict(data, source="recipe")
    with queue_only.client() as http:
        response = http.post("/jobs", json=data)
    assert response.status_code == 422
    assert response.json()["error"] == str(cli.value)


def test_unknown_ids_and_routes_are_404s_with_a_json_error(queue_only):
    with queue_only.client() as http:
        for method, path in [("GET", "/jobs/999"), ("GET", "/jobs/999/evaluations"), ("POST", "/jobs/999/cancel"),
                             ("GET", "/profiles/999"), ("GET", "/no/such/page")]:
            response = http.request(method, path)
            assert response.status_code == 404, path
            assert set(response.json()) == {"error"}


def test_a_queued_job_is_listed_and_can_be_cancelled_once(queue_only, tiny_model_dir):
    with queue_only.client() as http:
        created = http.post("/jobs", content=tiny_recipe_text(tiny_model_dir, "waits"), params={"name": "waits-here"})
        assert created.status_code == 201, created.text
        job = created.json()
        assert job["status"] == "queued" and job["name"] == "waits-here"
        assert job["id"] in [j["id"] for j in http.get("/jobs", params={"status": "queued"}).json()["jobs"]]
        clash = http.post("/jobs", content=tiny_recipe_text(tiny_model_dir, "waits"), params={"name": "waits-here"})
        assert clash.status_code == 409 and "waits-here" in clash.json()["error"]
        assert http.post(f"/jobs/{job['id']}/cancel").json()["status"] == "cancelled"
        again = http.post(f"/jobs/{job['id']}/cancel")
        assert again.status_code == 409 and "already cancelled" in again.json()["error"]
    assert run_folders(queue_only) == []  # a queued job has written no run folder


def test_an_uploaded_profile_is_registered_expanded_and_exported(queue_only):
    document = allocation_to_json(a_profile())
    with queue_only.client() as http:
        created = http.post("/profiles", content=document, headers={"Content-Type": "application/json"})
        assert created.status_code == 201, created.text
        profile = created.json()
        assert (profile["target"], profile["granularity"], profile["task"], profile["source"]) == (32, "layer",
                                                                                                   "passkey", "upload")
        same = http.post("/profiles", content=document)
        assert same.status_code == 200 and same.json()["id"] == profile["id"]

        fetched = http.get(f"/profiles/{profile['id']}")
        assert fetched.text == document and fetched.headers["etag"] == f'"{profile["content_hash"]}"'
        assert http.get(f"/profiles/{profile['id']}",
                        headers={"If-None-Match": fetched.headers["etag"]}).status_code == 304

        expanded = parse_allocation(http.get(f"/profiles/{profile['id']}", params={"budget": 64}).text)
        assert expanded.total == 64 * 4 * 2
        assert np.array_equal(expanded.budgets, a_profile().expand(64).budgets)

        kvpress = http.get(f"/profiles/{profile['id']}", params={"format": "kvpress", "context_length": 100})
        assert kvpress.json()["compression_ratios"] == [0.6, 0.64, 0.72, 0.76]
        assert kvpress.headers["etag"] != fetched.headers["etag"]
        unknown = http.get(f"/profiles/{profile['id']}", params={"format": "kvpres"})
        assert unknown.status_code == 422 and "did you mean 'kvpress'" in unknown.json()["error"]

        assert [p["id"]
                for p in http.get("/profiles", params={"scorer": "snapkv",
                                                       "granularity": "layer"}).json()["profiles"]] == [profile["id"]]
        assert http.get("/profiles", params={"task": "gsm8k"}).json()["profiles"] == []


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(budgets=[[1, -2]] * 4),
    lambda d: d.pop("geometry"),
    lambda d: d.update(format="something.else"),
    lambda d: d["budgets"].pop(),
])
def test_a_bad_allocation_upload_gets_the_cli_loaders_message(queue_only, mutate):
    data = json.loads(allocation_to_json(a_profile()))
    mutate(data)
    text = json.dumps(data)
    with pytest.raises(UserError) as cli:
        parse_allocation(text, source="allocation")
    with queue_only.client() as http:
        response = http.post("/profiles", content=text)
    assert response.status_code == 422
    assert response.json()["error"] == str(cli.value)


def test_a_body_over_the_limit_is_refused_with_413(queue_only):
    with queue_only.client() as http:
        response = http.post("/jobs", content=b"# " + b"x" * (2 << 20))
        assert response.status_code == 413 and "limit" in response.json()["error"]

        def chunks():  # no Content-Length: the limit counts the bytes as they come
            for _ in range(40):
                yield b"#" * 65536
        assert http.post("/profiles", content=chunks()).status_code == 413


def test_the_openapi_schema_describes_the_api(queue_only):
    with queue_only.client() as http:
        paths = http.get("/openapi.json").json()["paths"]
    assert {"/jobs", "/jobs/{job_id}", "/jobs/{job_id}/cancel", "/profiles", "/profiles/{profile_id}"} <= set(paths)
    assert "application/yaml" in paths["/jobs"]["post"]["requestBody"]["content"]


def test_the_http_process_never_imports_torch(queue_only, tiny_model_dir):
    with queue_only.client() as http:  # exercise the routes that validate and read
        assert http.post("/jobs", content=tiny_recipe_text(tiny_model_dir, "torchless"),
                         params={"name": "torchless"}).status_code == 201
        http.get("/jobs")
        http.get("/profiles")
    maps = Path(f"/proc/{queue_only.process.pid}/maps").read_text()
    assert "libtorch" not in maps and "libtorch" in _maps_of_a_torch_process()


def _maps_of_a_torch_process() -> str:
    """The check above can fail: a process that imports torch does map libtorch."""
    code = "import torch, os; print(open(f'/proc/{os.getpid()}/maps').read())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout


def test_the_cli_client_submits_lists_and_pulls(queue_only, tmp_path, tiny_model_dir):
    recipe = tmp_path / "from-cli.yaml"
    recipe.write_text(tiny_recipe_text(tiny_model_dir, "from-cli"))
    env_cmd = [sys.executable, "-m", "evolalloc"]
    submitted = subprocess.run([*env_cmd, "submit", str(recipe), "--service", queue_only.url],
                               capture_output=True, text=True, cwd=REPO, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    assert "(from-cli): queued" in submitted.stdout
    listed = subprocess.run([*env_cmd, "jobs", "--service", queue_only.url], capture_output=True, text=True, cwd=REPO,
                            timeout=120)
    assert "from-cli" in listed.stdout and "queued" in listed.stdout
    bad = subprocess.run([*env_cmd, "profiles", "pull", "999", "--service", queue_only.url], capture_output=True,
                         text=True,
                         cwd=REPO, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: service: no profile 999"


def test_the_cli_client_sends_a_recipe_merged_over_its_base(queue_only, tmp_path, tiny_model_dir):
    """The service reads no files: `submit` merges the base: chain and sends the result."""
    (tmp_path / "parent.yaml").write_text(tiny_recipe_text(tiny_model_dir, "parent"))
    (tmp_path / "child-run.yaml").write_text("base: parent.yaml\noptimizer: {seed: 3}\n")
    submitted = subprocess.run([sys.executable, "-m", "evolalloc", "submit", str(tmp_path / "child-run.yaml"),
                                "--service", queue_only.url], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    assert "(child-run): queued" in submitted.stdout


def test_writes_need_the_token_when_one_is_set(service_factory, tiny_model_dir):
    service = service_factory(max_jobs=0, token=TOKEN)
    body = tiny_recipe_text(tiny_model_dir, "guarded")
    with (
        service.client() as anonymous,
        service.client("wrong-token-wrong-token") as wrong,
        service.client(TOKEN) as right,
    ):
        assert anonymous.get("/jobs").status_code == 200  # reads stay open
        for client in (anonymous, wrong):
            response = client.post("/jobs", content=body)
            assert response.status_code == 401 and "error" in response.json()
            assert client.post("/profiles", content=allocation_to_json(a_profile())).status_code == 401
        assert anonymous.get("/jobs").json()["jobs"] == []
        assert right.post("/jobs", content=body).status_code == 201


def test_a_public_address_without_a_token_refuses_to_start(tmp_path):
    done = subprocess.run([sys.executable, "-m", "evolalloc", "serve", "--host", "0.0.0.0", "--runs-dir",
                           str(tmp_path / "runs")],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={k: v for k, v in __import__("os").environ.items() if k != "EVOLALLOC_SERVICE_TOKEN"})
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without a token" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_second_service_on_the_same_runs_dir_refuses_to_start(queue_only):
    done = subprocess.run([sys.executable, "-m", "evolalloc", "serve", "--port", "1", "--runs-dir",
                           str(queue_only.runs_dir)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and "another evolalloc service is using this runs dir" in done.stderr


def test_a_lukv_profile_is_registered_like_any_other(queue_only):
    from evolalloc.core.baselines import make_baseline
    from evolalloc.core.baselines.lukv import UtilityCurves

    utility = np.cumsum(np.random.default_rng(3).random((4, 2, 101)), axis=2)
    lukv = make_baseline("lukv", curves=UtilityCurves(utility, floor=8, meta={"split": "search", "instances": 4}))
    allocation = lukv.allocation(GEOMETRY, 32, model="tiny", scorer="snapkv", scorer_params={"window": 8})
    with queue_only.client() as http:
        created = http.post("/profiles", content=allocation_to_json(allocation))
        assert created.status_code == 201, created.text
        back = parse_allocation(http.get(f"/profiles/{created.json()['id']}").text)
    assert back.provenance["method"] == "lukv" and back.provenance["curves"] == "lukv-curves.npz"
    assert np.array_equal(back.budgets, allocation.budgets)
