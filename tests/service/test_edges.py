"""Correct answers at the edges: budgets far out or below the searched one, a study without a task,
two services on one database, a worker killed with SIGKILL (resumed over the API)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import optuna
import pytest

from evolalloc.client import Client, work
from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import allocation_to_json, parse_allocation
from evolalloc.core.geometry import ModelGeometry

from .conftest import REPO, ServiceProcess, tiny_recipe_text
from .test_jobs import gone_within, job_pid, stored_trials

GEOMETRY = ModelGeometry(num_layers=4, num_query_heads=4, num_kv_heads=2, head_dim=16, max_positions=2048)


@pytest.fixture(scope="module")
def queue_only(tmp_path_factory):
    service = ServiceProcess(tmp_path_factory.mktemp("edges") / "runs", max_jobs=0).start()
    yield service
    service.stop()


def registered(service: ServiceProcess) -> dict:
    rows = np.repeat(np.array([40, 36, 28, 24])[:, None], 2, axis=1)
    profile = Allocation(model="tiny", geometry=GEOMETRY, scorer="snapkv", scorer_params={"window": 8}, target=32,
                         granularity="layer", budgets=rows, provenance={"method": "evolved", "task": "passkey"})
    with service.client() as http:
        return http.post("/profiles", content=allocation_to_json(profile),
                         headers={"Content-Type": "application/json"}).json()


@pytest.mark.parametrize("budget, words", [
    ("1e17", "tokens in all"),  # once int64 wrap-around: budgets of 1
    ("1e300", "tokens in all"),
    ("16", "not above the searched target 32"),  # the CLI's rule, from Allocation.expand
    ("31.5", "not above the searched target 32"),
])
def test_a_budget_too_large_or_below_the_searched_one_is_a_422_naming_budget(queue_only, budget, words):
    profile = registered(queue_only)
    with queue_only.client() as http:
        response = http.get(f"/profiles/{profile['id']}", params={"budget": budget})
        assert response.status_code == 422, response.text
        assert response.json()["field"] == "budget" and words in response.json()["error"]
        larger = parse_allocation(http.get(f"/profiles/{profile['id']}", params={"budget": 64}).text)
        assert larger.total == 64 * 8 and (larger.budgets >= 24).all()


def test_a_study_without_a_task_registers_a_profile_that_exports(queue_only):
    client = Client(queue_only.url)
    study = client.create_study({"geometry": {"num_layers": 4, "num_kv_heads": 2}, "target": 32,
                                 "search_space": {"group_size": 4}, "optimizer": {"generations": 1}})
    work(client, study["id"], "a", lambda budgets: float(budgets[0, 0]) / 100)
    (profile_id,) = client.study(study["id"])["profile_ids"]
    with queue_only.client() as http:
        for fmt in ("json", "kvpress"):
            response = http.get(f"/profiles/{profile_id}", params={"format": fmt, "budget": 48})
            assert response.status_code == 200, response.text
        assert parse_allocation(http.get(f"/profiles/{profile_id}").text).provenance.get("task") is None


def test_a_second_service_on_the_same_database_with_another_runs_dir_refuses_to_start(queue_only, tmp_path):
    db = f"sqlite:///{queue_only.runs_dir / '.service' / 'service.db'}"
    command = [sys.executable, "-m", "evolalloc", "serve", "--port", "1", "--runs-dir", str(tmp_path / "other"),
               "--db", db, "--max-jobs", "1"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2, done.stderr
    assert "--db" in done.stderr and str(queue_only.runs_dir.resolve()) in done.stderr
    assert "Traceback" not in done.stderr
    with queue_only.client() as http:
        assert http.get("/health").json()["status"] == "ok"


def test_a_worker_killed_with_sigkill_fails_its_job_and_resume_finishes_it(service_factory, tiny_model_dir):
    service = service_factory(max_jobs=1)
    recipe = tiny_recipe_text(tiny_model_dir, "phoenix", optimizer={"name": "cma", "generations_per_group": 2},
                              task={"name": "passkey", "context_tokens": 200, "search": {"n": 4}, "heldout": {"n": 2}})
    with service.client() as http:
        job_id = http.post("/jobs", content=recipe).json()["id"]
        assert http.post(f"/jobs/{job_id}/resume").status_code == 409  # queued or running: nothing to resume
        study_db = service.runs_dir / "phoenix" / "study.db"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and stored_trials(study_db) < 6:
            time.sleep(0.02)
        worker = job_pid(service, job_id)
        os.killpg(worker, signal.SIGKILL)  # the worker alone (an out-of-memory kill): the service lives on
        assert gone_within(worker, seconds=10)
        failed = service.wait_for(job_id, states=("failed", "finished"))
        assert failed["status"] == "failed" and "signal 9" in failed["error"]
        resumed = http.post(f"/jobs/{job_id}/resume")
        assert resumed.status_code == 200 and resumed.json()["status"] == "queued", resumed.text
        done = service.wait_for(job_id)
        assert done["status"] == "finished", done["error"]
        assert done["attempts"] == 2 and done["evaluations_done"] == 3 + 24  # the start's 3, then 24
        assert http.post(f"/jobs/{job_id}/resume").status_code == 409  # finished
        assert http.post("/jobs/999/resume").status_code == 404
    study = optuna.load_study(study_name="phoenix", storage=f"sqlite:///{study_db}")
    keys = [(t.user_attrs["group"], t.user_attrs["generation"], t.user_attrs["candidate"]) for t in study.trials]
    assert len(keys) == len(set(keys)) == 3 + 24  # nothing lost, nothing repeated
