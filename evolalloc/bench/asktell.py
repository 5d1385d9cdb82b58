"""``evolalloc bench asktell``: suggest + complete round trips of a real service, and the overhead
per trial against the in-process loop.

A real ``evolalloc serve`` (SQLite beside a temporary runs dir, ``--max-jobs 0``) gets one study
of SmolLM2-135M's shape (30 layers x 3 KV heads, groups of 8 layers: populations 10, 10, 10, 9);
``clients`` asyncio clients then suggest, score the budgets with a cheap deterministic objective
and complete, until the study ends or ``seconds`` pass (both bounds stop it by itself). The
same settings and objective then run through the in-process loop (``run_search``) with its
default SQLite trial store and with the journal file, so the overhead per trial is measured
side by side. Only loopback traffic; the clients share the cores with the server, so the
figures are a floor for the server.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from evolalloc.bench.server import ServeProcess

LAYERS, HEADS, TARGET = 30, 3, 128.0


def objective(budgets: np.ndarray) -> float:
    """A cheap deterministic task score with its optimum at more cache low down, less up high."""
    optimum = np.linspace(1.5, 0.5, LAYERS)
    return float(1.0 - np.abs(np.asarray(budgets).mean(axis=1) / TARGET - optimum).mean() / 2)


def study_body(generations: int, seed: int) -> dict:
    return {"name": "bench", "geometry": {"num_layers": LAYERS, "num_kv_heads": HEADS}, "target": TARGET,
            "search_space": {"group_size": 8}, "optimizer": {"generations": generations, "seed": seed}}


@dataclass
class AsktellBench:
    clients: int
    planned: int
    seconds: float = 0.0
    round_trips_ms: list[float] = field(default_factory=list)
    waits: int = 0
    errors: int = 0
    first_error: str | None = None
    finished: bool = False
    local: dict[str, float] = field(default_factory=dict)  # storage -> seconds per trial

    def lines(self) -> list[str]:
        n = len(self.round_trips_ms)
        lat = np.array(self.round_trips_ms or [float("nan")])
        service_per_trial = self.seconds / n if n else float("nan")
        out = [
            f"clients: {self.clients}, trials: {n} of {self.planned} "
            f"({'study finished' if self.finished else 'stopped by the time bound'}), "
            f"wall {self.seconds:.2f} s",
            f"suggest+complete round trips: {n / self.seconds:.0f}/s; "
            f"per round trip p50 {np.percentile(lat, 50):.1f} ms, "
            f"p99 {np.percentile(lat, 99):.1f} ms; 'wait' answers (generation barrier): {self.waits}",
            f"errors: {self.errors}" + (f" (first: {self.first_error})" if self.first_error else ""),
            f"service: {service_per_trial * 1000:.2f} ms of wall time per trial",
        ]
        for storage, per_trial in self.local.items():
            out.append(f"in-process loop ({storage}): {per_trial * 1000:.2f} ms per trial; "
                       f"service overhead {(service_per_trial - per_trial) * 1000:+.2f} ms per trial")
        return out


async def _client(http: httpx.AsyncClient, study_id: int, name: str, stop_at: float, result: AsktellBench) -> None:
    while time.perf_counter() < stop_at:
        started = time.perf_counter()
        try:
            answer = (await http.post(f"/studies/{study_id}/suggest",
                                      json={"client_id": name})).raise_for_status().json()
            if answer["status"] == "finished":
                return
            if answer["status"] == "wait":
                result.waits += 1
                await asyncio.sleep(float(answer["retry_after"]))
                continue
            trial = answer["trial"]
            score = objective(np.asarray(trial["budgets"]))
            reply = await http.post(f"/trials/{trial['id']}/complete", json={"client_id": name, "lease": trial["lease"],
                                                                                 "task_score": score})
            reply.raise_for_status()
        except httpx.HTTPError as err:
            result.errors += 1
            result.first_error = result.first_error or f"{type(err).__name__}: {err}"
            await asyncio.sleep(0.1)
            continue
        result.round_trips_ms.append((time.perf_counter() - started) * 1000)


async def _run(base: str, study_id: int, clients: int, seconds: float, result: AsktellBench) -> None:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as http:
        started = time.perf_counter()
        await asyncio.gather(*(_client(http, study_id, f"bench-{k}", started + seconds, result)
                               for k in range(clients)))
        result.seconds = time.perf_counter() - started
        result.finished = (await http.get(f"/studies/{study_id}")).json()["status"] == "finished"


class _Objective:
    def evaluate(self, budgets):
        from evolalloc.engine.base import EvalResult

        return [EvalResult(task_score=objective(b)) for b in budgets]


def _local_seconds_per_trial(tmp: Path, generations: int, seed: int, storage: str | None) -> float:
    from evolalloc.search import SearchConfig, run_search

    run_dir = tmp / f"local-{'journal' if storage else 'sqlite'}"
    config = SearchConfig(num_layers=LAYERS, num_kv_heads=HEADS, target=TARGET, group_size=8, generations=generations,
                          seed=seed, storage=f"journal:{run_dir}/journal.log" if storage else None)
    started = time.perf_counter()
    result = run_search(run_dir, _Objective(), config, progress=False)
    return (time.perf_counter() - started) / len(result.history)


def bench_asktell(*, clients: int = 16, generations: int = 10, seconds: float = 120.0, seed: int = 0,
                  log=print) -> AsktellBench:
    import logging

    import optuna

    from evolalloc.search import SearchConfig

    optuna.logging.set_verbosity(logging.WARNING)
    config = SearchConfig(num_layers=LAYERS, num_kv_heads=HEADS, target=TARGET, group_size=8, generations=generations)
    planned = sum(generations * config.popsize_for(len(units)) for units in config.schedule())
    result = AsktellBench(clients=clients, planned=planned)
    with tempfile.TemporaryDirectory(prefix="evolalloc-bench-asktell-") as tmp:
        with ServeProcess(Path(tmp) / "runs", log=Path(tmp) / "service.log") as server:
            with httpx.Client(base_url=server.url, timeout=120) as http:
                study = http.post("/studies", json=study_body(generations, seed)).raise_for_status().json()
            log(f"server on {server.url}: study {study['id']} ({planned} "
                f"trials planned); {clients} clients, at most {seconds:g} s")
            asyncio.run(_run(server.url, study["id"], clients, seconds, result))
        log("the same search in-process (default SQLite trial store, then the journal file)")
        result.local["SQLite trial store"] = _local_seconds_per_trial(Path(tmp), generations, seed, None)
        result.local["journal file"] = _local_seconds_per_trial(Path(tmp), generations, seed, "journal")
    return result
