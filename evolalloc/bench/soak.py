"""``evolalloc bench soak``: a real service under a mixed load for a bounded time, watched for server
errors and memory growth.

A real ``evolalloc serve`` is started on a free loopback port with ``--max-jobs 0`` (jobs queue and
never run: the soak measures the HTTP service, not a search). Then, at once, for ``seconds``:

- ``job_clients`` clients each loop: submit a job (a recipe of ``--model``: its config is read, no
  weights), poll it, cancel it, resume it, poll it, cancel it again;
- ``study_clients`` clients each create an ask/tell study (the benchmark's SmolLM2-shaped one,
  ``bench/asktell.py``) and suggest + complete its trials with a cheap objective, a new study when
  one finishes.

Every request is timed. A 429 (the bounded queue) is an expected answer, counted apart; any 5xx
or a broken connection is an error. Before the clock starts, one job is submitted and cancelled and
one study created (the recipe validator process starts, importing torch): the start-up is neither
timed nor in the memory at start. The service's resident memory (its HTTP process, and with its
children: the recipe validator) is read from ``/proc`` then, every tenth of the run, and at the end.
Bounded in time (``seconds``) and in count (``MAX_REQUESTS``); loopback only; stops by itself.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from evolalloc import DEFAULT_MODEL
from evolalloc.bench.asktell import objective, study_body
from evolalloc.bench.server import ServeProcess

MAX_REQUESTS = 1_000_000  # a hard bound besides the duration
SAMPLES = 10  # memory readings during the run, besides the start and the end


@dataclass
class SoakBench:
    job_clients: int
    study_clients: int
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    broken: int = 0  # no HTTP answer at all (a reset or timed-out connection)
    first_error: str | None = None
    rss_start: tuple[int, int] = (0, 0)  # bytes: HTTP process, with its children
    rss_end: tuple[int, int] = (0, 0)
    rss_series: list[int] = field(default_factory=list)  # the HTTP process, every tenth of the run
    jobs_submitted: int = 0
    trials_completed: int = 0

    @property
    def requests(self) -> int:
        return len(self.latencies_ms) + self.broken

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)

    def lines(self) -> list[str]:
        lat = np.array(self.latencies_ms or [float("nan")])
        mib = lambda b: b / 2**20  # noqa: E731
        growth = (self.rss_end[0] / self.rss_start[0] - 1) * 100 if self.rss_start[0] else float("nan")
        codes = ", ".join(f"{status}: {n}" for status, n in sorted(self.statuses.items()))
        return [
            f"job clients: {self.job_clients}, study clients: {self.study_clients}, duration: {self.seconds:.1f} s, "
            f"requests: {self.requests} ({self.jobs_submitted} jobs "
            f"submitted, {self.trials_completed} trials completed)",
            f"throughput: {self.requests / self.seconds:.1f} requests/s" if self.seconds else "throughput: -",
            f"latency: p50 {np.percentile(lat, 50):.1f} ms, p99 "
            f"{np.percentile(lat, 99):.1f} ms, max {lat.max():.1f} ms",
            f"answers by status: {codes or '-'}",
            f"5xx: {self.server_errors}, broken connections: {self.broken}"
            + (f" (first: {self.first_error})" if self.first_error else ""),
            f"service RSS: start {mib(self.rss_start[0]):.1f} MiB, "
            f"end {mib(self.rss_end[0]):.1f} MiB ({growth:+.1f}%); "
            f"with its children: {mib(self.rss_start[1]):.1f} -> {mib(self.rss_end[1]):.1f} MiB",
            "service RSS over the run (MiB): " + " ".join(f"{mib(b):.0f}" for b in self.rss_series),
        ]


def resident_bytes(pid: int) -> tuple[int, int]:
    """Resident memory of ``pid`` and of ``pid`` plus its children (Linux ``/proc``; zeros elsewhere)."""
    def rss(p: int) -> int:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    children = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            children += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    own = rss(pid)
    return own, own + sum(rss(c) for c in children)


class _Timed:
    """One client's HTTP calls, each timed and counted into ``result``."""

    def __init__(self, http: httpx.AsyncClient, result: SoakBench, stop_at: float):
        self.http, self.result, self.stop_at = http, result, stop_at

    @property
    def running(self) -> bool:
        return time.perf_counter() < self.stop_at and self.result.requests < MAX_REQUESTS

    async def call(self, method: str, path: str, **kwargs) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.HTTPError as err:
            self.result.broken += 1
            self.result.first_error = self.result.first_error or f"{method} {path}: {type(err).__name__}"
            return None
        self.result.latencies_ms.append((time.perf_counter() - started) * 1000)
        self.result.statuses[response.status_code] += 1
        if response.status_code >= 500:
            self.result.first_error = self.result.first_error or f"{method} {path}: HTTP {response.status_code}"
        return response


async def _job_client(timed: _Timed, recipe: str, k: int) -> None:
    n = 0
    while timed.running:
        n += 1
        created = await timed.call("POST", "/jobs", content=recipe, params={"name": f"soak-{k}-{n}"},
                                   headers={"Content-Type": "application/yaml"})
        if created is None or created.status_code != 201:
            await asyncio.sleep(0.2)  # a full queue (429) or a refusal: back off a little
            continue
        timed.result.jobs_submitted += 1
        job = created.json()["id"]
        for path in (f"/jobs/{job}", f"/jobs/{job}", f"/jobs/{job}/evaluations"):
            await timed.call("GET", path)
        await timed.call("POST", f"/jobs/{job}/cancel")
        await timed.call("POST", f"/jobs/{job}/resume")
        await timed.call("GET", f"/jobs/{job}")
        await timed.call("POST", f"/jobs/{job}/cancel")


async def _study_client(timed: _Timed, generations: int, k: int) -> None:
    study = None
    while timed.running:
        if study is None:
            created = await timed.call("POST", "/studies",
                                       json={**study_body(generations, seed=k), "name": f"soak-{k}"})
            if created is None or created.status_code != 201:
                await asyncio.sleep(0.2)
                continue
            study = created.json()["id"]
        answer = await timed.call("POST", f"/studies/{study}/suggest", json={"client_id": f"soak-{k}"})
        if answer is None or answer.status_code != 200:
            await asyncio.sleep(0.2)
            continue
        body = answer.json()
        if body["status"] == "finished":
            await timed.call("GET", f"/studies/{study}")
            study = None
        elif body["status"] == "wait":
            await asyncio.sleep(min(1.0, float(body["retry_after"])))
        else:
            trial = body["trial"]
            done = await timed.call(
                "POST",
                f"/trials/{trial['id']}/complete",
                json={
                    "client_id": f"soak-{k}",
                    "lease": trial["lease"],
                    "task_score": objective(np.asarray(trial["budgets"])),
                },
            )
            if done is not None and done.status_code == 200:
                timed.result.trials_completed += 1


async def _run(server: ServeProcess, recipe: str, result: SoakBench, seconds: float, generations: int) -> None:
    clients = result.job_clients + result.study_clients
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=60) as http:
        started = time.perf_counter()
        stop_at = started + seconds

        async def memory():
            for _ in range(SAMPLES - 1):
                await asyncio.sleep(seconds / SAMPLES)
                result.rss_series.append(resident_bytes(server.process.pid)[0])

        result.rss_start = resident_bytes(server.process.pid)
        result.rss_series.append(result.rss_start[0])
        await asyncio.gather(memory(),
                             *(_job_client(_Timed(http, result, stop_at), recipe, k)
                               for k in range(result.job_clients)),
                             *(_study_client(_Timed(http, result, stop_at), generations, k)
                               for k in range(result.study_clients)))
        result.seconds = time.perf_counter() - started
    result.rss_end = resident_bytes(server.process.pid)
    result.rss_series.append(result.rss_end[0])


def _warm_up(server: ServeProcess, recipe: str) -> None:
    """One job submitted and cancelled, one study created: the validator process is up."""
    with httpx.Client(base_url=server.url, timeout=120) as http:
        job = http.post("/jobs", content=recipe, params={"name": "soak-warm-up"},
                        headers={"Content-Type": "application/yaml"}).raise_for_status().json()
        http.post(f"/jobs/{job['id']}/cancel").raise_for_status()
        http.post("/studies", json={**study_body(1, seed=0), "name": "soak-warm-up"}).raise_for_status()


def bench_soak(*, seconds: float = 60.0, job_clients: int = 4, study_clients: int = 4, generations: int = 2,
               model: str = DEFAULT_MODEL, max_queued: int = 8, log=print) -> SoakBench:
    """Run the soak (see the module's docstring); ``max_queued`` is the service's ``--max-queued``
    (small, so the clients meet the bounded queue's 429 too)."""
    result = SoakBench(job_clients=job_clients, study_clients=study_clients)
    recipe = f"model: {{spec: {model}}}\ntask: {{name: passkey}}\nbudget: {{target: 128}}\n"
    with tempfile.TemporaryDirectory(prefix="evolalloc-bench-soak-") as tmp:
        extra = (f"--max-queued={max_queued}",)
        if Path(model).exists():  # a local model folder: the service may read it (a bundled one needs nothing)
            extra += (f"--model-root={Path(model).resolve().parent}",)
        with ServeProcess(Path(tmp) / "runs", log=Path(tmp) / "service.log", extra=extra) as server:
            log(f"server on {server.url} (pid {server.process.pid}, --max-jobs 0 --max-queued {max_queued}); "
                f"{job_clients} job clients, {study_clients} study clients for {seconds:g} s")
            _warm_up(server, recipe)
            asyncio.run(_run(server, recipe, result, seconds, generations))
    return result
