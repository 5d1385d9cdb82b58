"""A job you can watch (issue 34): a running job shows a phase from its first second (it sat at
``phase: null`` through the model load and the drawing of instances), with progress within the
phases that count; a job over the operator's wall-time limit stops as ``failed`` with that reason,
and can be resumed to the end."""

from __future__ import annotations

import time

from .conftest import ServiceProcess, tiny_recipe_text

PHASES = {"starting", "drawing instances", "loading model", "prefilling", "profiling lukv", "tracing",
          "training scorer", "searching", "shipping", "comparing", "done"}


def watch(service: ServiceProcess, job_id: int, timeout: float = 240) -> list[dict]:
    """Every state of the job seen, polled every 0.1 s until it ends."""
    seen = []
    deadline = time.monotonic() + timeout
    with service.client() as http:
        while time.monotonic() < deadline:
            job = http.get(f"/jobs/{job_id}").json()
            seen.append(job)
            if job["status"] in ("finished", "failed", "cancelled"):
                return seen
            time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not end; log: {service.log.read_text()[-3000:]}")


def test_a_running_job_shows_a_phase_from_its_first_second_and_progress_within_it(service_factory, tiny_model_dir):
    service = service_factory(max_jobs=1)
    with service.client() as http:
        job = http.post("/jobs", content=tiny_recipe_text(tiny_model_dir, "watched")).json()
    seen = watch(service, job["id"])
    running = [s for s in seen if s["status"] == "running"]
    assert seen[-1]["status"] == "finished", seen[-1]
    assert running, "the job was never seen running"
    assert all(s["phase"] in PHASES for s in running), [s["phase"] for s in running]
    assert all(s["phase_since"] is not None for s in running)
    counted = [s for s in running if s["phase_total"]]
    assert counted and all(0 <= s["phase_done"] <= s["phase_total"] for s in counted), [
        (s["phase"], s["phase_done"], s["phase_total"]) for s in running]
    assert seen[-1]["phase"] == "done"


def test_a_job_over_the_wall_time_limit_fails_with_that_reason_and_resumes_to_the_end(tmp_path, tiny_model_dir):
    runs = tmp_path / "runs"
    limited = ServiceProcess(runs, max_jobs=1, extra=("--max-job-hours=0.0005",)).start()  # 1.8 s per run
    try:
        with limited.client() as http:
            job = http.post("/jobs", content=tiny_recipe_text(tiny_model_dir, "slow")).json()
        failed = limited.wait_for(job["id"], timeout=120)
    finally:
        limited.stop()
    assert failed["status"] == "failed", failed
    assert "wall-time limit of 1.8 s" in failed["error"] and "--max-job-hours" in failed["error"], failed
    relaxed = ServiceProcess(runs, max_jobs=1).start()  # the same runs dir, the default limit
    try:
        with relaxed.client() as http:
            resumed = http.post(f"/jobs/{job['id']}/resume")
        assert resumed.status_code == 200 and resumed.json()["status"] in ("queued", "running"), resumed.text
        finished = relaxed.wait_for(job["id"])
        assert finished["status"] == "finished" and finished["attempts"] >= 2, finished
    finally:
        relaxed.stop()
