"""Evaluators on bounded, spilled records give the full records' results; a budget above b_max
is served by prefilling again; Ray shards spill into the run folder and re-use it on restart."""

from __future__ import annotations

import dataclasses

import pytest

from evolalloc.engine.local import LocalEvaluator, prefill_instances
from evolalloc.runtime.instances import POLICY_BOUND
from evolalloc.runtime.record_store import RecordKeeper, RecordPolicy
from evolalloc.runtime.spill import MappedLayers
from tests.engine.conftest import allocations, make_instances, make_spec

B_MAX = 30


def comparable(result):
    return (result.task_score, result.error,
            [(o.uid, o.prediction, o.metric, o.score, o.generated_tokens, o.error) for o in result.instances])


@pytest.fixture(scope="module")
def instances(tiny_loaded, passkey):
    return make_instances(passkey, tiny_loaded.tokenizer, 3)


@pytest.fixture(scope="module")
def full_results(tiny_loaded, passkey, snapkv, instances):
    evaluator = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, batch_size=8)
    return {mode: [comparable(r) for r in LocalEvaluator(tiny_loaded, passkey, instances, snapkv, batch_size=8,
                                                         records=evaluator.records, mode=mode).evaluate(allocations())]
            for mode in ("generate", "likelihood")}


@pytest.mark.parametrize("mode", ["generate", "likelihood"])
def test_bounded_spilled_records_score_like_full_ones_and_larger_budgets_prefill_again(
        tmp_path, tiny_loaded, passkey, snapkv, instances, full_results, mode, capsys):
    keeper = RecordKeeper(RecordPolicy(bound=B_MAX, memory=0, spill_dir=str(tmp_path), model_id="tiny"))
    records = prefill_instances(tiny_loaded, instances, [snapkv], keeper=keeper)
    assert all(isinstance(r.keys, MappedLayers) and r.bound == B_MAX for r in records)
    assert len(list(tmp_path.glob("*.safetensors"))) == len(instances)
    evaluator = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, batch_size=8, records=records, mode=mode)
    # allocations(): 8 and 24 everywhere are within B_MAX; the uneven one (up to 40) and 4096 are not.
    assert [comparable(r) for r in evaluator.evaluate(allocations())] == full_results[mode]
    said = capsys.readouterr()
    assert "above the records' b_max = 30" in said.out + said.err


def test_bound_none_is_whole_records_as_for_an_unbounded_policy(tiny_loaded, snapkv, instances):
    """One spelling of "whole records": ``bound=None`` to ``prefill_instances`` means what an
    unbounded policy's ``bound=None`` means; left out, the keeper policy's bound applies."""
    policy = RecordPolicy(bound=B_MAX, model_id="tiny")
    assert all(r.bound == B_MAX
               for r in prefill_instances(tiny_loaded, instances, [snapkv], keeper=RecordKeeper(policy)))
    for keeper, bound in ((RecordKeeper(policy), None), (RecordKeeper(policy.unbounded()), POLICY_BOUND)):
        records = prefill_instances(tiny_loaded, instances, [snapkv], keeper=keeper, bound=bound)
        assert all(r.bound is None and r.keys[0].shape[-2] == r.length > B_MAX for r in records)


def test_ray_shards_spill_into_the_folder_and_a_new_pool_reuses_it(
        ray_session, tmp_path, tiny_model_dir, tiny_loaded, snapkv, instances, full_results):
    from evolalloc.engine.ray_engine import RayEvaluator, RayWorkerPool

    policy = RecordPolicy(bound=B_MAX, memory=0, spill_dir=str(tmp_path), model_id=str(tiny_model_dir))
    spec = dataclasses.replace(make_spec(tiny_model_dir, [snapkv]), records=policy)
    budgets = allocations()
    pool = RayWorkerPool(spec, instances, workers=2)
    try:
        first = [comparable(r) for r in RayEvaluator(pool, snapkv).evaluate(budgets)]
    finally:
        pool.close()
    assert first == full_results["generate"]
    files = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.safetensors")}
    assert len(files) == len(instances)

    pool = RayWorkerPool(spec, instances, workers=2)  # e.g. `resume`: the shards find their records
    try:
        again = [comparable(r) for r in RayEvaluator(pool, snapkv).evaluate(budgets)]
    finally:
        pool.close()
    assert again == first
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.safetensors")} == files  # re-used, not rewritten
