"""Splitting task instances across workers, and merging the workers' results back.

Pure functions with no Ray in sight, so the sharding rules are tested in milliseconds. A shard
is a contiguous slice of the instance list: concatenating the shards' outcomes in shard order
gives back the original instance order, which is what makes a Ray evaluation comparable
outcome-by-outcome (and score-by-score) with a local one.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from evolalloc.engine.base import EvalResult


def shard_bounds(num_instances: int, workers: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of each non-empty shard: sizes differ by at most one, bigger ones first.

    Never more shards than instances: a worker without instances would hold a model for nothing.
    """
    if num_instances < 1:
        raise ValueError("cannot shard an empty instance list")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    count = min(workers, num_instances)
    base, extra = divmod(num_instances, count)
    bounds, start = [], 0
    for k in range(count):
        stop = start + base + (1 if k < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def failed_shard(num_allocations: int, error: str) -> list[EvalResult]:
    """What a shard contributes when its worker could not evaluate the population at all."""
    return [EvalResult(task_score=None, error=error) for _ in range(num_allocations)]


def merge_results(per_shard: Sequence[Sequence[EvalResult]], seconds: float) -> list[EvalResult]:
    """One ``EvalResult`` per allocation from every shard's results for the same population.

    Instances are concatenated in shard order; ``task_score`` is the mean over *all* instances
    (not a mean of shard means, which would weight a small shard more). An allocation that failed
    on any shard fails as a whole, with every shard's error: a score over part of the instances
    would be a different, silently easier task. ``seconds`` is the population's wall time; each
    allocation gets an equal share, as the local engine does.
    """
    sizes = {len(results) for results in per_shard}
    if len(sizes) != 1:
        raise ValueError(f"shards returned different numbers of results: {sorted(sizes)}")
    count = sizes.pop()
    merged = []
    for a in range(count):
        parts = [results[a] for results in per_shard]
        errors = [f"shard {k}: {part.error}" for k, part in enumerate(parts) if part.error is not None]
        if errors:
            merged.append(EvalResult(task_score=None, seconds=seconds / count, error="; ".join(errors)))
            continue
        instances = [outcome for part in parts for outcome in part.instances]
        score = float(np.mean([o.score for o in instances])) if instances else None
        merged.append(EvalResult(task_score=score, instances=instances, seconds=seconds / count))
    return merged
