"""The cluster path of docs/service.md: ``ray start --head`` on loopback, a service job with
``engine: {kind: ray}`` on a service started with ``--ray-address auto`` joins it and finds what the local engine finds.

The head runs in its own process group with private ports and temp dir, and that group alone is
stopped afterwards (never ``ray stop``, which would end every Ray on the machine).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import optuna
import pytest

from .conftest import ServiceProcess, free_port, tiny_recipe_text

RAY = shutil.which("ray") or str(Path(os.sys.executable).parent / "ray")
pytestmark = pytest.mark.skipif(not os.path.exists(RAY), reason="needs the ray command line (pip install ray)")


@pytest.fixture(scope="module")
def ray_head():
    temp_dir = tempfile.mkdtemp(prefix="evolalloc-ray-", dir="/tmp")  # Ray's socket paths must stay short
    port = free_port()
    command = [RAY, "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus",
               "2",
               "--object-store-memory", str(200 * 1024**2), "--include-dashboard", "false", "--disable-usage-stats",
               "--temp-dir", temp_dir, "--dashboard-port", str(free_port()),
               "--dashboard-agent-listen-port", str(free_port()), "--dashboard-agent-grpc-port", str(free_port()),
               "--runtime-env-agent-port", str(free_port()), "--metrics-export-port", str(free_port())]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    log = open(Path(temp_dir) / "ray-start.log", "w")  # noqa: SIM115 - closed at the end of the module
    head = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not _listening(port):
        assert head.poll() is None, f"ray start --head exited: {Path(log.name).read_text()[-1500:]}"
        time.sleep(0.5)
    yield f"127.0.0.1:{port}"
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            break
        try:
            head.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(head.pid, signal.SIGKILL)  # whatever the head left in its group
    except ProcessLookupError:
        pass
    log.close()
    shutil.rmtree(temp_dir, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_job_on_a_ray_cluster_finds_what_the_local_engine_finds(ray_head, two_jobs, tiny_model_dir, tmp_path,
                                                                  monkeypatch):
    local_service, _, _ = two_jobs  # its job "first" ran this recipe on the local engine
    monkeypatch.setenv("RAY_ADDRESS", ray_head)  # what `--ray-address auto` joins, as on a node of the cluster
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    service = ServiceProcess(tmp_path / "runs", max_jobs=1, extra=("--ray-address", "auto")).start()
    try:  # the operator says where Ray is; the recipe only asks for the ray engine
        recipe = tiny_recipe_text(tiny_model_dir, "first", engine={"kind": "ray", "workers": 1,
                                                                    "threads": 1, "batch_size": 8})
        with service.client() as http:
            job_id = http.post("/jobs", content=recipe).json()["id"]
        job = service.wait_for(job_id)
    finally:
        service.stop()
    assert job["status"] == "finished", job["error"]
    log = (service.runs_dir / ".service" / "jobs" / f"{job_id}.log").read_text()
    assert "Started a local Ray instance" not in log  # it joined the cluster rather than starting its own

    on_ray, local = service.runs_dir / "first", local_service.runs_dir / "first"
    assert trials(on_ray) == trials(local)  # the same candidates, asked in the same order, scored the same
    for name in ("allocation-c24.json", "allocation-c48.json"):
        ray_doc, local_doc = (json.loads((run / name).read_text()) for run in (on_ray, local))
        assert ray_doc["budgets"] == local_doc["budgets"]
    assert (
        json.loads((on_ray / "comparison.json").read_text())["rows"]
        == json.loads((local / "comparison.json").read_text())["rows"]
    )


def trials(run: Path) -> list:
    study = optuna.load_study(study_name="first", storage=f"sqlite:///{run / 'study.db'}")
    return sorted((t.user_attrs["group"], t.user_attrs["generation"], t.user_attrs["candidate"],
                   t.user_attrs["budgets"],
                   t.user_attrs["task_score"], t.value) for t in study.trials)
