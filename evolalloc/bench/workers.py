"""``bench workers``: candidate evaluations per minute, local engine vs Ray workers, side by side.

On the same passkey prompts and the same random allocations (``bench.random_allocations``) it
measures, in one run:
  - the local engine in this process with 1 torch thread;
  - Ray with 1 worker x 1 thread (what Ray itself costs: serialisation, scheduling, the barrier);
  - Ray with 2 workers x 1 thread (how the instance sharding scales).
Prefill (once per worker) is set-up, reported but not timed into the rate: a search pays it once
and then evaluates hundreds of populations. All three engines are built first and each evaluates
the population once to warm up (first-call allocations); then the timed repeats go round-robin
(local, Ray x1, Ray x2, local, ...), so that load from other processes on a shared machine falls
on all engines alike, and the best repeat of each counts. Only one engine runs at any moment;
the private Ray advertises 3 logical CPUs only so that both pools' actors can stay alive (idle)
side by side. The Ray results are checked to be identical to the local ones, so the speed is
not bought with different answers.

On a GPU (``device="cuda"``, the default where there is one) every engine holds the model on the
card: the local engine in this process, and each Ray worker a share of the one GPU (a third each,
so the three workers of both pools fit at once; the share is Ray's bookkeeping, not a limit). There
a small model's decode is bound by kernel launches from the host, which two workers overlap.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field


@dataclass
class EngineTiming:
    name: str
    setup_seconds: float  # model load + prefill (workers: until every worker is ready)
    seconds: list[float] = field(default_factory=list)  # per timed population
    identical: bool | None = None  # results equal to the local engine's (None for the local engine)

    @property
    def best(self) -> float:
        return min(self.seconds)

    def per_minute(self, candidates: int) -> float:
        return 60.0 * candidates / self.best


@dataclass
class WorkersBenchResult:
    prompts: int
    prompt_tokens: float
    candidates: int
    cpus: int
    timings: list[EngineTiming]
    device: str = "cpu"
    dtype: str = "float32"

    def rate(self, name: str) -> float:
        return next(t for t in self.timings if t.name == name).per_minute(self.candidates)

    def lines(self) -> list[str]:
        out = [f"prompts: {self.prompts} passkey prompts, mean {self.prompt_tokens:.0f} tokens; "
               f"{self.candidates} random allocations at c = 128 per population; machine CPUs: {self.cpus}; "
               f"device: {self.device} ({self.dtype})"]
        for t in self.timings:
            same = "" if t.identical is None else f"   results identical to local: {'yes' if t.identical else 'NO'}"
            out.append(f"{t.name:<26}: {t.per_minute(self.candidates):8.1f} evaluations/min "
                       f"(best of {len(t.seconds)}: {t.best:6.2f} s per "
                       f"population; set-up {t.setup_seconds:5.1f} s){same}")
        local, one, two = (self.rate(t.name) for t in self.timings)
        out.append(f"ray 1 worker / local       : {one / local:8.2f}x")
        out.append(f"ray 2 workers / 1 worker   : {two / one:8.2f}x")
        return out

    def to_dict(self) -> dict:
        """The figures as JSON (``--json``): each engine's timings, rate and sameness, and the two ratios."""
        local, one, two = (self.rate(t.name) for t in self.timings)
        return {"prompts": self.prompts, "prompt_tokens": self.prompt_tokens, "candidates": self.candidates,
                "cpus": self.cpus, "device": self.device, "dtype": self.dtype,
                "engines": [{"name": t.name, "setup_seconds": t.setup_seconds, "seconds": t.seconds,
                             "best_seconds": t.best, "per_minute": t.per_minute(self.candidates),
                             "identical_to_local": t.identical} for t in self.timings],
                "ray1_over_local": one / local, "ray2_over_ray1": two / one}


def _comparable(results) -> list:
    return [(r.task_score, r.error, [(o.uid, o.prediction, o.score) for o in r.instances]) for r in results]


def bench_workers(model_spec: str, *, prompts: int = 4, context_tokens: int = 1000, candidates: int = 8,
                  batch_size: int = 16, repeats: int = 3, seed: int = 0, dtype: str = "float32",
                  device: str | None = None, log=print) -> WorkersBenchResult:
    """Run the three engines on the same candidates and instances; see the module docstring.

    ``device``: ``cpu`` or ``cuda`` (default: ``cuda`` where there is one); ``dtype`` as ``model.dtype``.
    """
    import ray
    import torch

    from evolalloc.bench.eval import random_allocations
    from evolalloc.engine.local import LocalEvaluator
    from evolalloc.engine.ray_cluster import start_local_ray
    from evolalloc.engine.ray_engine import RayEvaluator, RayWorkerPool
    from evolalloc.engine.ray_worker import WorkerSpec
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.scorers import get_scorer
    from fitness import get_task

    torch.set_num_threads(1)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    started = time.perf_counter()
    loaded = load_model(model_spec, dtype=dtype, device=device)
    task, scorer = get_task("passkey"), get_scorer("snapkv")
    instances = task.instances("search", prompts, seed, context_tokens, loaded.tokenizer)
    g = loaded.geometry
    allocations = random_allocations(candidates, g.num_layers, g.num_kv_heads, 128, scorer.always_kept, seed)
    local = LocalEvaluator(loaded, task, instances, scorer, batch_size=batch_size)
    timings = [EngineTiming("local, 1 thread", time.perf_counter() - started)]
    evaluators = [local]
    prompt_tokens = sum(r.length for r in local.records) / len(local.records)

    spec = WorkerSpec(model=model_spec, dtype=dtype, threads=1, task="passkey", task_params={},
                      instances=[], scorers=[scorer], batch_size=batch_size)
    owns_ray = not ray.is_initialized()
    if owns_ray:
        start_local_ray(num_cpus=3)  # Ray finds the GPUs itself; on a CPU machine it finds none
    # On a GPU each worker reserves a third of it, so both pools' three workers fit at once; on the
    # CPU none reserves one.
    gpu_share = 1 / 3 if device == "cuda" else 0.0
    pools = []
    try:
        for workers in (1, 2):
            log(f"starting {workers} Ray worker(s): model load + prefill ...")
            started = time.perf_counter()
            pools.append(RayWorkerPool(spec, instances, workers, gpu_share=gpu_share))
            timings.append(EngineTiming(f"ray, {workers} worker{'s' if workers > 1 else ''} x 1 thread",
                                        time.perf_counter() - started))
            evaluators.append(RayEvaluator(pools[-1], scorer))
        results = [evaluator.evaluate(allocations) for evaluator in evaluators]  # warm-up
        for r in range(repeats):
            log(f"timed round {r + 1}/{repeats} ...")
            for k, (evaluator, timing) in enumerate(zip(evaluators, timings)):
                started = time.perf_counter()
                results[k] = evaluator.evaluate(allocations)
                timing.seconds.append(time.perf_counter() - started)
    finally:
        for pool in pools:
            pool.close()
        if owns_ray:
            ray.shutdown()
    for timing, result in zip(timings[1:], results[1:]):
        timing.identical = _comparable(result) == _comparable(results[0])
    return WorkersBenchResult(prompts=prompts, prompt_tokens=prompt_tokens, candidates=candidates,
                              cpus=os.cpu_count() or 1, timings=timings, device=device, dtype=dtype)
