"""Jobs end to end on the tiny model: run, queue, register, resume after a SIGKILL, cancel."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from datetime import datetime

import numpy as np
import optuna

from evolalloc.core.allocation_file import load_allocation, parse_allocation

from .conftest import REPO, ServiceProcess, tiny_recipe_text


def test_with_max_jobs_1_the_second_job_waits_then_runs(two_jobs):
    _, (first, second), seen_waiting = two_jobs
    assert seen_waiting
    assert first["status"] == second["status"] == "finished", (first["error"], second["error"])
    assert datetime.fromisoformat(second["started_at"]) >= datetime.fromisoformat(first["finished_at"])


def test_a_finished_job_reports_its_progress_and_registers_its_profiles(two_jobs):
    service, (first, _), _ = two_jobs
    # the start's 3 profiles (uniform, PyramidKV, LU-KV at c), then 2 groups x 1 generation x 6
    assert first["evaluations_done"] == first["evaluations_planned"] == 3 + 2 * 1 * 6
    assert first["best_fitness"] is not None and first["phase"] == "done" and first["seconds"] > 0
    with service.client() as http:
        job = http.get(f"/jobs/{first['id']}").json()
        profiles = http.get("/profiles").json()["profiles"]
        assert sorted(p["target"] for p in profiles if p["job_id"] == first["id"]) == [24, 48]
        target = next(p for p in profiles if p["job_id"] == first["id"] and p["target"] == 24)
        assert target["id"] in job["profiles"]
        assert (target["model"], target["task"], target["scorer"], target["granularity"]) == (job["model"], "passkey",
                                                                                              "snapkv", "layer")
        assert {row["method"] for row in target["comparison"]} == {"evolved", "uniform"}

        fetched = http.get(f"/profiles/{target['id']}").text
        on_disk = load_allocation(service.runs_dir / "first" / "allocation-c24.json")
        assert np.array_equal(parse_allocation(fetched).budgets, on_disk.budgets)
        expanded = parse_allocation(http.get(f"/profiles/{target['id']}", params={"budget": 96}).text)
        assert expanded.total == 96 * 4 * 2 and np.array_equal(expanded.budgets,
                                                               on_disk.expand(96, min_budget=8).budgets)
        kvpress = http.get(f"/profiles/{target['id']}", params={"format": "kvpress", "budget": 48}).json()
        assert kvpress["target"] == 48 and len(kvpress["budgets"]) == 4

        evaluations = http.get(f"/jobs/{first['id']}/evaluations").json()
        # the start's 3 (group -1, before the first group), then 2 groups x 1 generation x 6
        groups = [e["group"] for e in evaluations["evaluations"]]
        assert groups.count(-1) == 3 and len(groups) == 3 + 12
        assert np.array(evaluations["best_budgets"]).shape == (4, 2)
        assert evaluations["comparison"]["rows"]


def test_the_cli_pulls_a_profile_expanded_and_exported(two_jobs, tmp_path):
    service, _, _ = two_jobs
    profile_id = next(p["id"] for p in service.client().get("/profiles").json()["profiles"] if p["target"] == 24)
    out = tmp_path / "pulled.json"
    done = subprocess.run([sys.executable, "-m", "evolalloc", "profiles", "pull", str(profile_id), "--budget", "96",
                           "--service", service.url, "-o", str(out)], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert load_allocation(out).total == 96 * 4 * 2


def test_a_service_killed_mid_search_resumes_the_job_without_losing_or_repeating_an_evaluation(service_factory,
                                                                                               tiny_model_dir):
    service = service_factory(max_jobs=1)
    recipe = tiny_recipe_text(tiny_model_dir, "survivor", optimizer={"name": "cma", "generations_per_group": 2},
                              task={"name": "passkey", "context_tokens": 200, "search": {"n": 4}, "heldout": {"n": 2}})
    with service.client() as http:
        job_id = http.post("/jobs", content=recipe).json()["id"]
    study_db = service.runs_dir / "survivor" / "study.db"
    deadline = time.monotonic() + 180
    stored = 0
    while time.monotonic() < deadline and stored < 6:  # watch the trial store itself: finer than the job row
        stored = stored_trials(study_db)
        time.sleep(0.02)
    assert 6 <= stored < 24, stored  # 2 groups x 2 generations x 6: killed after the first generation, before the end
    worker = job_pid(service, job_id)
    service.kill()  # SIGKILL: no clean-up of any kind
    assert gone_within(worker, seconds=10), "the worker outlived its killed service"

    service.start()
    done = service.wait_for(job_id)
    assert done["status"] == "finished", done["error"]
    assert done["attempts"] == 2 and done["evaluations_done"] == 3 + 24  # the start's 3, then 24
    study = optuna.load_study(study_name="survivor", storage=f"sqlite:///{service.runs_dir / 'survivor' / 'study.db'}")
    keys = [(t.user_attrs["group"], t.user_attrs["generation"], t.user_attrs["candidate"]) for t in study.trials]
    assert len(keys) == len(set(keys)) == 3 + 24  # each evaluation stored exactly once


def test_cancelling_a_running_job_kills_its_worker(service_factory, tiny_model_dir):
    service = service_factory(max_jobs=1)
    with service.client() as http:
        job_id = http.post("/jobs", content=tiny_recipe_text(tiny_model_dir, "doomed")).json()["id"]
        service.wait_for(job_id, states=("running",), timeout=60)
        worker = job_pid(service, job_id)
        cancelled = http.post(f"/jobs/{job_id}/cancel").json()
        assert cancelled["status"] == "cancelled"
        assert gone_within(worker, seconds=15)
        time.sleep(1.5)  # a scheduler tick: the reaped worker must not turn the job into "failed"
        assert http.get(f"/jobs/{job_id}").json()["status"] == "cancelled"


def test_a_worker_never_runs_a_job_whose_lock_another_worker_holds(tmp_path):
    lock = tmp_path / "job.lock"
    with open(lock, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        command = [sys.executable, "-m", "evolalloc.service.worker", "--recipe-file", str(tmp_path / "r.yaml"),
                   "--runs-dir", str(tmp_path / "runs"), "--name", "x", "--attempt", "2", "--parent", str(os.getpid()),
                   "--lock", str(lock), "--error-file", str(tmp_path / "error"), "--result-file",
                   str(tmp_path / "result")]
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "EVOLALLOC_WORKER_LOCK_WAIT": "1"})
    assert done.returncode == 75
    assert (tmp_path / "error").read_text() == "another worker still runs this job"
    assert not (tmp_path / "runs").exists()


def stored_trials(study_db) -> int:
    """Finished trials in a study file, read-only (never creates the file)."""
    import sqlite3

    if not study_db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{study_db}?mode=ro", uri=True, timeout=1) as connection:
            return connection.execute("select count(*) from trials").fetchone()[0]
    except sqlite3.Error:  # tables not created yet
        return 0


def job_pid(service: ServiceProcess, job_id: int) -> int:
    from sqlalchemy import create_engine, text

    engine = create_engine(f"sqlite:///{service.runs_dir / '.service' / 'service.db'}")
    with engine.connect() as connection:
        pid = connection.execute(text("select pid from jobs where id = :id"), {"id": job_id}).scalar()
    engine.dispose()
    assert pid
    return pid


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if _is_zombie(pid):
            return True
        time.sleep(0.1)
    return False


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
