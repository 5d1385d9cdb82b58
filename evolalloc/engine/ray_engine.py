"""The Ray engine: a pool of worker actors, each holding a model and its shard's prefill records.

``RayWorkerPool`` starts (or joins) Ray, shards the instances across ``workers`` actors (one GPU
each when the cluster has as many as workers, else a share of a card each, ``ray_cluster.gpus_per_worker``;
without GPUs ``threads`` CPU threads each) and waits until every actor
has loaded the model and prefilled its shard. ``evaluate(budgets, scorer, mode)`` puts the population
in the object store once, sends it to every actor, waits for *all* of them (the generation
barrier: the search hears nothing until the whole population is done) and merges the shards'
results per allocation (``shards.merge_results``).

Faults. A worker that dies during an evaluation (killed, crashed, OOM-killed by the OS or by
Ray's memory monitor) is replaced by a fresh actor, which re-prefills its shard, and *only that
shard's* work is retried, at most ``max_retries`` times; the other shards' finished results are
kept. If it keeps dying, that population's allocations come back failed (FAIL trials, with the
error), never as invented scores, and the pool carries on with a fresh actor for the next one.
Running out of memory on one instance is not a death: ``LocalEvaluator`` in the worker turns it
into that allocation's error. An exception raised *inside* a worker's evaluate is a bug, not a
fault, and is re-raised.

``RayEvaluator`` is the ``Evaluator`` the search sees: a pool plus the scorer to rank with.
``RayEngine`` (engine ``ray``) keeps at most one live pool per workload: asking for another
split closes the previous pool first, because its workers hold the GPUs (or CPUs) the new ones
need — ``search`` then ``compare`` use the search pool, then the held-out one. Asking again for
the same split (``compare`` does, once per method) re-uses the pool, so the held-out instances
are prefilled once however many scorers are evaluated on them. ``close()`` stops the last pool.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Sequence

import numpy as np

from evolalloc.engine.base import Engine, EvalResult, check_scorer, register_engine
from evolalloc.engine.ray_cluster import cluster_gpus, connect, cpus_per_worker, gpus_per_worker
from evolalloc.engine.ray_worker import EvalWorker, WorkerSpec, instance_to_wire
from evolalloc.engine.shards import failed_shard, merge_results, shard_bounds

log = logging.getLogger(__name__)

DEFAULT_MAX_RETRIES = 2


def _death_errors() -> tuple[type[BaseException], ...]:
    """Ray errors meaning "the worker process is gone", as opposed to an error raised inside it."""
    from ray import exceptions as rex

    return (rex.RayActorError, rex.WorkerCrashedError, rex.OutOfMemoryError, rex.NodeDiedError, rex.ObjectLostError)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


class RayWorkerPool:
    """Worker actors over shards of ``instances``; see the module docstring.

    Args:
        spec: the worker spec *without* instances (each shard's are filled in).
        instances: the split's ``Instance`` objects, in order.
        workers: actors wanted (never more than instances).
        address: ``local``, ``auto`` or ``ray://host:port`` (see ``ray_cluster``).
        max_retries: extra attempts for a shard whose worker died during one evaluation.
        worker_class / worker_kwargs: the actor's class (tests pass subclasses that misbehave).
        gpu_share: the GPU each actor reserves where the cluster has one (default: a whole one each
            while there are enough, else ``ray_cluster.gpus_per_worker``'s share; a benchmark holding
            several pools at once on one card passes a smaller one so that all of them fit).
    """

    def __init__(self, spec: WorkerSpec, instances: Sequence, workers: int, *, address: str = "local",
                 max_retries: int = DEFAULT_MAX_RETRIES, worker_class: type = EvalWorker,
                 worker_kwargs: dict | None = None, gpu_share: float | None = None):
        import ray

        self.max_retries = max_retries
        self.restarts = 0  # workers replaced so far (after a death)
        self.bounds = shard_bounds(len(instances), workers)
        self._owns_ray = connect(address, workers=len(self.bounds), threads=spec.threads)
        wire = [instance_to_wire(inst) for inst in instances]
        self._specs = [WorkerSpec(**{**vars(spec), "instances": wire[a:b]}) for a, b in self.bounds]
        gpus = cluster_gpus()
        share = gpus_per_worker(len(self.bounds), gpus) if gpu_share is None or not gpus else gpu_share
        if 0 < share < 1:
            log.info("%d workers share the cluster's %g GPU(s): %g of a GPU each", len(self.bounds), gpus, share)
        options = {"num_gpus": share,
                   "num_cpus": cpus_per_worker(len(self.bounds), spec.threads, self._owns_ray and address == "local"),
                   "max_restarts": 0}  # restarts are ours: we must know which shard to retry
        self._actor_class = ray.remote(worker_class).options(**options)
        self._worker_kwargs = worker_kwargs or {}
        self.actors = [self._start(k) for k in range(len(self.bounds))]
        self.closed = False
        # Wait for every load + prefill now, so a bad model path fails here and not as FAIL trials.
        try:
            ray.get([actor.ready.remote() for actor in self.actors])
        except Exception:
            self.close()
            raise

    @property
    def scorer_keys(self) -> list[str]:
        return [s.key for s in self._specs[0].scorers]

    def _start(self, shard: int):
        return self._actor_class.remote(self._specs[shard], **self._worker_kwargs)

    def _replace(self, shard: int) -> None:
        """A fresh actor for ``shard`` (it re-prefills); the old one is made sure to be gone."""
        import ray

        ray.kill(self.actors[shard], no_restart=True)
        self.actors[shard] = self._start(shard)
        self.restarts += 1

    def inherit_ray(self, owned: bool) -> None:
        """Take over shutting down a Ray that an earlier pool started and left running."""
        self._owns_ray = self._owns_ray or owned

    def pids(self) -> list[int]:
        """Process ids of the current workers (for tests and diagnostics)."""
        import ray

        return ray.get([actor.pid.remote() for actor in self.actors])

    def evaluate(self, budgets: Sequence[np.ndarray], scorer, mode: str = "generate") -> list[EvalResult]:
        """Every allocation on every shard, merged; returns only when the whole population is done."""
        import ray

        if self.closed:
            raise RuntimeError("this Ray worker pool is closed")
        budgets = [np.asarray(b) for b in budgets]
        if not budgets:
            return []
        started = time.perf_counter()
        population = ray.put(budgets)  # stored once, read by every worker
        per_shard: list[list[EvalResult] | None] = [None] * len(self.actors)
        deaths = [0] * len(self.actors)
        pending = {actor.evaluate.remote(population, scorer, mode): k for k, actor in enumerate(self.actors)}
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            shard = pending.pop(ref)
            try:
                per_shard[shard] = ray.get(ref)
            except _death_errors() as exc:
                deaths[shard] += 1
                a, b = self.bounds[shard]
                log.warning("worker %d (instances %d-%d) died (%s); restarting it", shard, a, b - 1, _first_line(exc))
                self._replace(shard)
                if deaths[shard] > self.max_retries:
                    per_shard[shard] = failed_shard(len(budgets), f"worker for instances {a}-{b - 1} died "
                                                                  f"{deaths[shard]} times: {_first_line(exc)}")
                else:
                    pending[self.actors[shard].evaluate.remote(population, scorer, mode)] = shard
            except ray.exceptions.RayTaskError as exc:
                raise exc.as_instanceof_cause() from None
        return merge_results(per_shard, time.perf_counter() - started)

    def close(self, keep_ray: bool = False) -> bool:
        """Stop the workers, and Ray itself if this pool started it (unless ``keep_ray``).

        Returns whether the caller now owns a Ray this pool had started and left running.
        """
        if getattr(self, "closed", True):
            return False
        import ray

        self.closed = True
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        if self._owns_ray and not keep_ray:
            ray.shutdown()
            return False
        return self._owns_ray


class RayEvaluator:
    """The search's ``Evaluator`` on a ``RayWorkerPool``, ranking tokens with ``scorer`` and
    scoring in fitness ``mode`` (see ``LocalEvaluator``)."""

    def __init__(self, pool: RayWorkerPool, scorer, mode: str = "generate"):
        from fitness.task import check_fitness_mode

        self.mode = check_fitness_mode(mode)
        check_scorer(scorer, pool.scorer_keys)
        self.pool, self.scorer = pool, scorer

    def evaluate(self, budgets: Sequence[np.ndarray]) -> list[EvalResult]:
        return self.pool.evaluate(budgets, self.scorer, self.mode)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> "RayEvaluator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@register_engine("ray")
class RayEngine(Engine):
    """Worker actors on Ray, one pool at a time (see the module docstring).

    ``max_retries`` (an ``engine.options`` key): extra attempts for a shard whose worker died.
    """

    def __init__(self, workload, *, max_retries: int = DEFAULT_MAX_RETRIES):
        super().__init__(workload)
        self.max_retries = max_retries
        self._split: str | None = None
        self._pool: RayWorkerPool | None = None

    def evaluator(self, split: str, scorer, mode: str = "generate") -> RayEvaluator:
        self.check_open()
        from evolalloc.core.decode_eviction import check_decode_mode

        check_decode_mode(self.workload.decode, mode)  # before any worker starts
        return RayEvaluator(self.pool(split), scorer, mode)

    def pool(self, split: str) -> RayWorkerPool:
        """The pool for ``split``, started on first use; another split's pool is closed first."""
        if self._pool is not None and self._split == split and not self._pool.closed:
            return self._pool
        inherited_ray = False
        if self._pool is not None:
            # Keep Ray itself (starting it again costs seconds); the next pool shuts it down instead.
            inherited_ray = self._pool.close(keep_ray=True)
        work = self.workload
        spec = WorkerSpec(
            model=work.model_spec,
            dtype=work.dtype,
            # One thread per worker unless told otherwise: workers are the unit of parallelism.
            threads=work.threads or 1,
            task=work.task_name,
            task_params=dict(work.task_params),
            instances=[],
            scorers=list(work.scorers()),
            question_after_compression=work.question_after_compression,
            batch_size=work.batch_size,
            records=_shard_policy(work, split),
            decode=work.decode,
        )
        self._pool = RayWorkerPool(spec, work.instances(split), work.workers,
                                   address=work.address, max_retries=self.max_retries)
        self._pool.inherit_ray(inherited_ray)
        self._split = split
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        super().close()


def _shard_policy(workload, split: str):
    """The workload's record policy for one worker's shard: the memory limit shared by the workers."""
    if workload.record_policy_for is None:
        return None
    policy = workload.record_policy_for(split)
    if policy.memory is not None:
        policy = dataclasses.replace(policy, memory=policy.memory // max(1, workload.workers))
    return policy
