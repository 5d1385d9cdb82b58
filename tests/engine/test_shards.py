"""Sharding instances across workers and merging their results (no Ray needed)."""

from __future__ import annotations

import pytest

from evolalloc.engine.base import EvalResult, InstanceOutcome
from evolalloc.engine.shards import failed_shard, merge_results, shard_bounds


def outcome(uid: str, score: float) -> InstanceOutcome:
    return InstanceOutcome(uid=uid, prediction=uid, metric=score, score=score)


@pytest.mark.parametrize("n, workers", [(1, 1), (5, 2), (7, 3), (8, 4), (3, 8)])
def test_shards_cover_every_instance_once_in_order_with_sizes_within_one(n, workers):
    bounds = shard_bounds(n, workers)
    flat = [i for a, b in bounds for i in range(a, b)]
    assert flat == list(range(n))
    sizes = [b - a for a, b in bounds]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
    assert len(bounds) == min(n, workers)


def test_sharding_nothing_or_to_no_workers_raises():
    with pytest.raises(ValueError):
        shard_bounds(0, 2)
    with pytest.raises(ValueError):
        shard_bounds(3, 0)


def test_merged_score_is_the_mean_over_all_instances_not_over_shard_means():
    big = [EvalResult(task_score=0.0, instances=[outcome("a", 0.0), outcome("b", 0.0), outcome("c", 0.0)])]
    small = [EvalResult(task_score=1.0, instances=[outcome("d", 1.0)])]
    [merged] = merge_results([big, small], seconds=2.0)
    assert merged.ok and merged.task_score == pytest.approx(0.25)
    assert [o.uid for o in merged.instances] == ["a", "b", "c", "d"]
    assert merged.seconds == 2.0


def test_an_allocation_failed_on_one_shard_fails_whole_and_names_the_shard():
    ok = [EvalResult(task_score=1.0, instances=[outcome("a", 1.0)]),
          EvalResult(task_score=1.0, instances=[outcome("a", 1.0)])]
    bad = [EvalResult(task_score=1.0, instances=[outcome("b", 1.0)]),
           EvalResult(task_score=None, error="OutOfMemoryError on b")]
    first, second = merge_results([ok, bad], seconds=1.0)
    assert first.ok
    assert not second.ok and second.task_score is None and "shard 1: OutOfMemoryError on b" in second.error


def test_a_failed_shard_fails_every_allocation_of_the_population():
    merged = merge_results([failed_shard(3, "worker died"), failed_shard(3, "worker died")], seconds=0.0)
    assert [m.ok for m in merged] == [False, False, False]


def test_shards_that_disagree_on_the_population_size_are_refused():
    with pytest.raises(ValueError, match="different numbers"):
        merge_results([failed_shard(2, "x"), failed_shard(3, "x")], seconds=0.0)

