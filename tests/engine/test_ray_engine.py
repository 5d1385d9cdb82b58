"""The Ray engine against the local one, on a shared local Ray with 2 CPUs."""

from __future__ import annotations

import pytest

from evolalloc.engine.local import LocalEvaluator
from evolalloc.engine.ray_engine import RayEvaluator, RayWorkerPool
from tests.engine.conftest import allocations, make_instances, make_spec


def comparable(result):
    """Everything a result says except timing."""
    return (result.task_score, result.error,
            [(o.uid, o.prediction, o.metric, o.score, o.generated_tokens, o.error) for o in result.instances])


@pytest.fixture(scope="module")
def three_instances(tiny_loaded, passkey):
    return make_instances(passkey, tiny_loaded.tokenizer, 3)


@pytest.fixture(scope="module")
def two_worker_pool(ray_session, tiny_model_dir, three_instances, snapkv):
    from evolalloc.runtime.scorers import get_scorer

    # Uneven shards (2 + 1 instances) and two scorers' rankings, as compare needs.
    pool = RayWorkerPool(make_spec(tiny_model_dir, [snapkv, get_scorer("streaming")]), three_instances, workers=2)
    yield pool
    pool.close()


def test_ray_and_local_engines_give_identical_results_for_the_same_allocations(tiny_loaded, passkey, snapkv,
                                                                               three_instances, two_worker_pool):
    budgets = allocations()
    local = LocalEvaluator(tiny_loaded, passkey, three_instances, snapkv, batch_size=8).evaluate(budgets)
    remote = RayEvaluator(two_worker_pool, snapkv).evaluate(budgets)
    assert len(remote) == len(budgets)
    assert [comparable(r) for r in remote] == [comparable(r) for r in local]
    assert all(r.ok for r in remote)
    # The allocations really differ in what they decode, so equality is not trivial.
    assert len({tuple(o.prediction for o in r.instances) for r in remote}) > 1


def test_ray_workers_give_the_local_likelihood_scores(tiny_loaded, passkey, snapkv, three_instances, two_worker_pool):
    budgets = allocations()
    local = LocalEvaluator(tiny_loaded, passkey, three_instances, snapkv, batch_size=8,
                           mode="likelihood").evaluate(budgets)
    remote = RayEvaluator(two_worker_pool, snapkv, mode="likelihood").evaluate(budgets)
    # Shards batch other rows together than one local evaluator does: equal up to float rounding.
    assert [[o.uid for o in r.instances] for r in remote] == [[o.uid for o in r.instances] for r in local]
    assert [[o.score for o in r.instances]
            for r in remote] == [pytest.approx([o.score for o in r.instances], rel=1e-5, abs=0) for r in local]
    assert [r.task_score for r in remote] == [pytest.approx(r.task_score, rel=1e-5, abs=0) for r in local]
    assert all(r.ok for r in remote) and all(o.mode == "likelihood" and o.prediction == "" for r in remote
                                             for o in r.instances)
    # The same pool still generates: the mode travels with each call.
    generated = RayEvaluator(two_worker_pool, snapkv).evaluate(budgets[:1])[0]
    assert generated.instances[0].mode == "generate" and generated.instances[0].generated_tokens > 0


def test_ray_workers_give_the_local_fidelity_scores(tiny_loaded, passkey, snapkv, three_instances, two_worker_pool):
    budgets = allocations()
    local = LocalEvaluator(tiny_loaded, passkey, three_instances, snapkv, batch_size=8,
                           mode="fidelity").evaluate(budgets)
    # Each worker writes its shard's full-cache continuations itself, one record at a time, as the local one does.
    remote = RayEvaluator(two_worker_pool, snapkv, mode="fidelity").evaluate(budgets)
    assert all(r.ok for r in remote) and all(o.mode == "fidelity" for r in remote for o in r.instances)
    assert [[o.score for o in r.instances]
            for r in remote] == [pytest.approx([o.score for o in r.instances], rel=1e-5, abs=1e-6) for r in local]
    assert remote[-1].task_score == pytest.approx(1.0, abs=1e-6) and remote[0].task_score < 1.0  # full vs tight


def test_the_pool_uses_one_worker_per_shard_in_separate_processes(two_worker_pool):
    import os

    assert two_worker_pool.bounds == [(0, 2), (2, 3)]
    pids = two_worker_pool.pids()
    assert len(set(pids)) == 2 and os.getpid() not in pids


def test_a_second_scorer_is_evaluated_on_the_same_workers(tiny_loaded, passkey, three_instances, two_worker_pool):
    from evolalloc.runtime.scorers import get_scorer

    streaming = get_scorer("streaming")
    budgets = allocations()[:2]
    local = LocalEvaluator(tiny_loaded, passkey, three_instances, streaming, batch_size=8).evaluate(budgets)
    assert [comparable(r) for r in RayEvaluator(two_worker_pool, streaming).evaluate(budgets)] == [comparable(r)
                                                                                                   for r in local]


def test_a_scorer_the_records_do_not_rank_is_refused_up_front(two_worker_pool):
    from evolalloc.runtime.scorers import get_scorer

    with pytest.raises(ValueError, match="no ranking for scorer 'knorm'"):
        RayEvaluator(two_worker_pool, get_scorer("knorm"))


def test_an_empty_population_needs_no_workers(two_worker_pool, snapkv):
    assert RayEvaluator(two_worker_pool, snapkv).evaluate([]) == []
