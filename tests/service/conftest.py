"""The real service as a subprocess on a free loopback port, and tiny recipes for it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TOKEN = "test-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServiceProcess:
    """``evolalloc serve`` in its own process; ``kill()`` is a SIGKILL, ``start()`` starts it again."""

    def __init__(self, runs_dir: Path, *, max_jobs: int = 1, token: str | None = None, extra: tuple = (),
                 model_roots: tuple | None = None):
        self.runs_dir = runs_dir
        # Recipes may only name models inside a --model-root: by default the session's temp
        # folder, which holds the tiny model (runs_dir is <session temp>/<test>/runs).
        self.model_roots = (runs_dir.parent.parent,) if model_roots is None else model_roots
        self.max_jobs = max_jobs
        self.token = token
        self.extra = extra
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = runs_dir.parent / f"service-{self.port}.log"

    def start(self) -> ServiceProcess:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
        env.pop("EVOLALLOC_SERVICE_TOKEN", None)
        if self.token:
            env["EVOLALLOC_SERVICE_TOKEN"] = self.token
        command = [sys.executable, "-m", "evolalloc", "serve", "--port", str(self.port), "--runs-dir", str(self.runs_dir),
                   "--max-jobs", str(self.max_jobs), *(f"--model-root={root}" for root in self.model_roots), *self.extra]
        self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=open(self.log, "a"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("the service did not answer within 60 s")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def wait_for(self, job_id: int, states=("finished", "failed", "cancelled"), timeout: float = 240) -> dict:
        deadline = time.monotonic() + timeout
        with self.client() as http:
            while time.monotonic() < deadline:
                job = http.get(f"/jobs/{job_id}").json()
                if job["status"] in states:
                    return job
                time.sleep(0.5)
        raise AssertionError(f"job {job_id} still {job['status']} after {timeout} s; log: {self.log.read_text()[-3000:]}")


def tiny_recipe_text(model_dir: Path, name: str, **changes) -> str:
    """A recipe that runs in seconds on the tiny model: 4 layers in 2 groups, 6 candidates a generation."""
    recipe = {
        "name": name,
        "model": {"spec": str(model_dir)},
        "task": {"name": "passkey", "context_tokens": 200, "search": {"n": 2}, "heldout": {"n": 3}},
        "scorer": {"name": "snapkv", "params": {"window": 8}},
        "budget": {"target": 24, "expansions": [48]},
        "search_space": {"name": "layer_groups", "group_size": 2},
        "optimizer": {"name": "cma", "generations_per_group": 1},
        "engine": {"kind": "local", "threads": 1, "batch_size": 8},
        "baselines": ["uniform"],
        "seed": 0,
    }
    recipe.update(changes)
    return yaml.safe_dump(recipe)


@pytest.fixture
def service_factory(tmp_path):
    started: list[ServiceProcess] = []

    def make(**kwargs) -> ServiceProcess:
        service = ServiceProcess(tmp_path / "runs", **kwargs)
        started.append(service)
        return service.start()

    yield make
    for service in started:
        service.stop()


@pytest.fixture(scope="session")
def two_jobs(tmp_path_factory, tiny_model_dir):
    """A service with --max-jobs 1 and two tiny jobs submitted at once; both run to the end."""
    service = ServiceProcess(tmp_path_factory.mktemp("jobs") / "runs", max_jobs=1).start()
    with service.client() as http:
        first = http.post("/jobs", content=tiny_recipe_text(tiny_model_dir, "first")).json()
        second = http.post("/jobs", content=tiny_recipe_text(tiny_model_dir, "second")).json()
        seen_second_waiting_while_first_ran = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            a, b = http.get(f"/jobs/{first['id']}").json(), http.get(f"/jobs/{second['id']}").json()
            if a["status"] == "running" and b["status"] == "queued":
                seen_second_waiting_while_first_ran = True
                break
            time.sleep(0.2)
    jobs = (service.wait_for(first["id"]), service.wait_for(second["id"]))
    yield service, jobs, seen_second_waiting_while_first_ran
    service.stop()
