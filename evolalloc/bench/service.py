"""``evolalloc bench service``: many clients polling jobs and fetching profiles from a real server.

A real ``evolalloc serve`` is started on a free loopback port with ``--max-jobs 0`` (jobs are
queued, never run: the benchmark measures the HTTP service, not a search), a few profiles are
registered and a few jobs submitted, then ``clients`` concurrent clients loop for ``seconds``:
each request is, in turn, a job's status, the job list, a profile, a profile expanded to another
budget, and a profile exported as kvpress. Only loopback traffic; the loop is bounded in time
and in count and stops by itself.

The clients are asyncio tasks in this process, on the same cores as the server, so the figures
are a floor for the server (the client's own cost is in them).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from evolalloc import DEFAULT_MODEL
from evolalloc.bench.server import ServeProcess

MAX_REQUESTS = 2_000_000  # a hard bound besides the duration


@dataclass
class ServiceBench:
    clients: int
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None

    @property
    def requests(self) -> int:
        return len(self.latencies_ms) + self.errors

    def lines(self) -> list[str]:
        lat = np.array(self.latencies_ms) if self.latencies_ms else np.array([float("nan")])
        return [
            f"clients: {self.clients}, duration: {self.seconds:.1f} s, requests: {self.requests}",
            f"throughput: {self.requests / self.seconds:.0f} requests/s",
            f"latency: p50 {np.percentile(lat, 50):.1f} ms, p99 "
            f"{np.percentile(lat, 99):.1f} ms, max {lat.max():.1f} ms",
            f"errors: {self.errors}" + (f" (first: {self.first_error})" if self.first_error else ""),
        ]


def _profile_documents(n: int) -> list[str]:
    from evolalloc.core.allocation import Allocation
    from evolalloc.core.allocation_file import allocation_to_json
    from evolalloc.core.geometry import ModelGeometry

    geometry = ModelGeometry(num_layers=30, num_query_heads=9, num_kv_heads=3, head_dim=64, max_positions=8192)
    rng = np.random.default_rng(0)
    documents = []
    for i in range(n):
        per_layer = rng.integers(32, 256, size=30)
        allocation = Allocation(model=DEFAULT_MODEL, geometry=geometry, target=128, granularity="layer",
                                budgets=np.repeat(per_layer[:, None], 3, axis=1),
                                provenance={"method": "evolved", "task": "passkey", "fitness": 0.5 + i / 100})
        documents.append(allocation_to_json(allocation.complete()))
    return documents


RECIPE = "task: {name: passkey}\nbudget: {target: 128}\n"


async def _client(http: httpx.AsyncClient, paths: list[str], offset: int, stop_at: float, result: ServiceBench) -> None:
    i = offset
    while time.perf_counter() < stop_at and result.requests < MAX_REQUESTS:
        path = paths[i % len(paths)]
        i += 1
        started = time.perf_counter()
        try:
            response = await http.get(path)
            ok = response.status_code == 200
            problem = None if ok else f"{path}: HTTP {response.status_code}"
        except httpx.HTTPError as err:
            ok, problem = False, f"{path}: {type(err).__name__}"
        if ok:
            result.latencies_ms.append((time.perf_counter() - started) * 1000)
        else:
            result.errors += 1
            result.first_error = result.first_error or problem


async def _run(base: str, paths: list[str], clients: int, seconds: float) -> ServiceBench:
    result = ServiceBench(clients=clients, seconds=seconds)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as http:
        started = time.perf_counter()
        await asyncio.gather(*(_client(http, paths, k, started + seconds, result) for k in range(clients)))
        result.seconds = time.perf_counter() - started
    return result


def bench_service(*, clients: int = 32, seconds: float = 30.0, log=print) -> ServiceBench:
    with tempfile.TemporaryDirectory(prefix="evolalloc-bench-service-") as tmp:
        with ServeProcess(Path(tmp) / "runs", log=Path(tmp) / "service.log") as server:  # --max-jobs 0: jobs only queue
            with httpx.Client(base_url=server.url, timeout=120) as http:
                profiles = [http.post("/profiles", content=doc).json()["id"] for doc in _profile_documents(4)]
                jobs = []
                for k in range(4):
                    response = http.post("/jobs", content=RECIPE, params={"name": f"bench-{k}"})
                    response.raise_for_status()
                    jobs.append(response.json()["id"])
            paths = []
            for k in range(4):
                paths += [f"/jobs/{jobs[k]}", "/jobs", f"/profiles/{profiles[k]}",
                          f"/profiles/{profiles[k]}?budget={256 + 64 * k}", f"/profiles/{profiles[k]}?format=kvpress"]
            log(f"server on {server.url}: {len(profiles)} profiles, "
                f"{len(jobs)} queued jobs; {clients} clients for {seconds:g} s")
            return asyncio.run(_run(server.url, paths, clients, seconds))
