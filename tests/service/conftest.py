"""The real service as a subprocess on a free loopback port, and tiny recipes for it."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
import yaml

from evolalloc.bench.server import ServeProcess, free_port  # noqa: F401 - free_port: for the cluster tests

REPO = Path(__file__).resolve().parents[2]
TOKEN = "test-token-0123456789abcdef"


class ServiceProcess(ServeProcess):
    """``evolalloc serve`` in its own process (``evolalloc.bench.server``), with a client and a job
    waiter; ``kill()`` is a SIGKILL, ``start()`` starts it again."""

    def __init__(self, runs_dir: Path, *, max_jobs: int = 1, token: str | None = None, extra: tuple = (),
                 model_roots: tuple | None = None):
        # Recipes may only name models inside a --model-root: by default the session's temp
        # folder, which holds the tiny model (runs_dir is <session temp>/<test>/runs).
        self.model_roots = (runs_dir.parent.parent,) if model_roots is None else model_roots
        port = free_port()
        super().__init__(runs_dir, log=runs_dir.parent / f"service-{port}.log", max_jobs=max_jobs, token=token,
                         extra=(*(f"--model-root={root}" for root in self.model_roots), *extra),
                         port=port, cwd=REPO, start_timeout=60)

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
        raise AssertionError(f"job {job_id} still {job['status']} after "
                             f"{timeout} s; log: {self.log.read_text()[-3000:]}")


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
