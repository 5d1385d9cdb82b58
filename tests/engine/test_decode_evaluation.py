"""The evaluators hold the budgets while decoding when the workload says so: the local evaluator decodes and
teacher-forces under decode-time eviction as the runtime does, the engines hand the setting on, and a
setting they cannot use is refused before any evaluation."""

from __future__ import annotations

import pytest
import torch

import evolalloc
from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.engine.local import LocalEngine, LocalEvaluator
from evolalloc.engine.workload import Workload
from evolalloc.runtime.held_likelihood import held_logprobs
from evolalloc.runtime.scorers import get_scorer
from tests.engine.conftest import allocations, make_instances, make_spec

HELD = DecodeEviction(2)


@pytest.fixture(scope="module")
def instances(tiny_loaded, passkey):
    return make_instances(passkey, tiny_loaded.tokenizer, 3)


def predictions(result):
    return [o.prediction for o in result.instances]


def test_the_local_evaluator_answers_what_generate_answers_under_the_same_held_budgets(tiny_loaded, passkey, snapkv,
                                                                                       instances):
    budgets = allocations()
    held = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, decode=HELD).evaluate(budgets)
    prompt_only = LocalEvaluator(tiny_loaded, passkey, instances, snapkv).evaluate(budgets)
    for allocation, result in zip(budgets, held):
        assert result.ok
        out = evolalloc.generate(tiny_loaded.model, tiny_loaded.tokenizer, [i.prompt for i in instances], allocation,
                                 scorer=snapkv, max_new_tokens=instances[0].max_new_tokens, stop=instances[0].stop,
                                 decode=HELD)
        assert predictions(result) == out.texts
    assert predictions(held[-1]) == predictions(prompt_only[-1])  # budgets above everything: nothing evicted
    assert any(predictions(a) != predictions(b) for a, b in zip(held, prompt_only))


def test_likelihood_under_held_budgets_is_the_teacher_forced_probability_with_the_same_evictions(tiny_loaded, passkey,
                                                                                                snapkv, instances):
    budgets = allocations()
    evaluator = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, mode="likelihood", decode=HELD)
    results = evaluator.evaluate(budgets)
    tokenizer = tiny_loaded.tokenizer
    for allocation, result in zip(budgets, results):
        rows = [(record, allocation, torch.tensor(tokenizer.encode(passkey.reference_continuations(inst)[0],
                                                                   add_special_tokens=False)))
                for record, inst in zip(evaluator.records, instances)]
        expected = [float(out.token_logprobs.double().exp().mean())
                    for out in held_logprobs(tiny_loaded.model, rows, snapkv, HELD)]
        assert [o.score for o in result.instances] == pytest.approx(expected, rel=1e-5, abs=0)
    full = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, mode="likelihood",
                          records=evaluator.records).evaluate(budgets[-1:])[0]
    assert results[-1].task_score == pytest.approx(full.task_score, rel=1e-5, abs=0)


def test_the_local_engine_hands_the_workloads_setting_to_its_evaluators(tiny_loaded, passkey, snapkv, instances):
    work = Workload(model_spec="tiny", dtype="float32", task_name="passkey", task_params={},
                    question_after_compression=False, batch_size=8, decode=HELD, load_model=lambda: tiny_loaded,
                    load_task=lambda: passkey, scorers=lambda: [snapkv], instances=lambda split: instances,
                    records=lambda split: None)
    with LocalEngine(work) as engine:
        assert engine.evaluator("search", snapkv, mode="graded").decode == HELD


def test_a_setting_the_evaluator_cannot_hold_is_refused_before_any_evaluation(tiny_loaded, passkey, instances,
                                                                               monkeypatch):
    with pytest.raises(ValueError, match="scorer 'random' cannot rank generated tokens"):
        LocalEvaluator(tiny_loaded, passkey, instances, get_scorer("random"), decode=HELD)
    import evolalloc.core.decode_eviction as setting

    monkeypatch.setattr(setting, "DECODE_FITNESS_MODES", ("generate", "graded"))  # a mode that cannot (fidelity, say)
    with pytest.raises(ValueError, match="fitness mode 'likelihood' cannot hold budgets while decoding"):
        LocalEvaluator(tiny_loaded, passkey, instances, get_scorer("tova"), mode="likelihood", decode=HELD)


def test_ray_workers_hold_the_budgets_as_the_local_evaluator_does(ray_session, tiny_model_dir, tiny_loaded, passkey,
                                                                  snapkv, instances):
    from evolalloc.engine.ray_engine import RayEvaluator, RayWorkerPool

    spec = make_spec(tiny_model_dir, [snapkv])
    spec.decode = HELD
    pool = RayWorkerPool(spec, instances, workers=1)
    try:
        remote = RayEvaluator(pool, snapkv).evaluate(allocations())
    finally:
        pool.close()
    local = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, decode=HELD).evaluate(allocations())
    assert [predictions(r) for r in remote] == [predictions(r) for r in local]
