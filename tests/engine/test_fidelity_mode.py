"""The fidelity fitness mode and the tasks judged against the full cache, on the tiny random Llama
folder with the real tokenizer: the full cache's continuation is its own greedy answer, written once
per record with the stock model's log-probabilities; the full cache's budgets score the best
possible fidelity (1) and a tight cache less; the full cache agrees with itself (1.0) and a tight
cache less; a failing candidate is a failure; bounded records give the same continuations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.engine.local import LocalEvaluator, tokenize_instance
from fitness.task import FIDELITY_MODES
from tests.engine.conftest import CONTEXT_TOKENS

FULL = np.full((4, 2), 4096)  # more than any prompt: nothing is evicted
TIGHT, ROOMY = np.full((4, 2), 8), np.full((4, 2), 64)


@pytest.fixture(scope="module")
def prose():
    from fitness import get_task

    return get_task("continue_prose", max_new_tokens=12)


@pytest.fixture(scope="module")
def instances(tiny_loaded, prose):
    return prose.instances("search", 3, 0, CONTEXT_TOKENS, tiny_loaded.tokenizer)


@pytest.fixture(scope="module")
def fidelity(tiny_loaded, prose, snapkv, instances):
    return LocalEvaluator(tiny_loaded, prose, instances, snapkv, mode="fidelity")


def test_the_full_caches_own_budgets_score_the_best_possible_fidelity(fidelity):
    (result,) = fidelity.evaluate([FULL])
    assert result.ok and result.task_score == pytest.approx(1.0, abs=1e-6)
    for outcome in result.instances:
        assert outcome.mode == "fidelity" and outcome.prediction == "" and outcome.generated_tokens == 0
        assert outcome.score == pytest.approx(1.0, abs=1e-6) and outcome.metric == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("mode", FIDELITY_MODES[1:])
def test_every_fidelity_mode_scores_the_full_cache_one_and_a_tight_cache_less(tiny_loaded, prose, snapkv, instances,
                                                                             fidelity, mode):
    evaluator = LocalEvaluator(tiny_loaded, prose, instances, snapkv, records=fidelity.records, mode=mode)
    full, tight = evaluator.evaluate([FULL, TIGHT])
    assert full.task_score == pytest.approx(1.0, abs=1e-6) and tight.task_score < 1.0
    assert all(o.mode == mode for o in tight.instances)
    # metric: the likelihood kept, whichever score the mode climbs
    capped = fidelity.evaluate([TIGHT])[0]
    assert [o.metric for o in tight.instances] == pytest.approx([o.metric for o in capped.instances], rel=1e-6)


def test_a_heavily_compressed_cache_scores_lower_and_a_roomier_one_in_between(fidelity):
    tight, roomy, full = (r.task_score for r in fidelity.evaluate([TIGHT, ROOMY, FULL]))
    assert tight < roomy < full
    assert all(0 < o.score < 1 for o in fidelity.evaluate([TIGHT])[0].instances)


def test_the_continuation_is_the_full_caches_greedy_answer_with_the_stock_models_log_probabilities(
        tiny_loaded, tiny_model_dir, prose, snapkv, instances, fidelity):
    from transformers import AutoModelForCausalLM

    generated = LocalEvaluator(tiny_loaded, prose, instances, snapkv, records=fidelity.records).evaluate([FULL])[0]
    stock = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="sdpa", dtype=torch.float32)
    for inst, record, outcome in zip(instances, fidelity.records, generated.instances):
        (continuation,) = record.continuations.values()
        assert continuation.text == outcome.prediction and len(continuation.token_ids) == inst.max_new_tokens
        prompt = tokenize_instance(tiny_loaded.tokenizer, inst, False)[0]
        ids = torch.tensor([prompt + continuation.token_ids.tolist()])
        with torch.no_grad():
            logits = stock.eval()(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
        expected = torch.log_softmax(logits, dim=-1).gather(1, continuation.token_ids[:, None])[:, 0]
        torch.testing.assert_close(continuation.full_logprobs, expected, rtol=1e-4, atol=1e-4)
        # ... and greedy: each token is the stock model's most likely one after the ones before it.
        assert torch.equal(logits.argmax(dim=-1), continuation.token_ids)


def test_the_continuation_is_written_once_per_record_and_shared_by_later_evaluators(
        tiny_loaded, prose, snapkv, instances, fidelity, monkeypatch):
    import evolalloc.runtime.continuation as continuation

    kept = [next(iter(record.continuations.values())) for record in fidelity.records]

    def never(*args, **kwargs):
        raise AssertionError("a continuation was written again")

    monkeypatch.setattr(continuation, "full_continuation", never)
    for mode in ("fidelity", "generate", "graded"):
        evaluator = LocalEvaluator(tiny_loaded, prose, instances, snapkv, records=fidelity.records, mode=mode)
        assert evaluator._continuations == kept and all(a is b for a, b in zip(evaluator._continuations, kept))
        assert evaluator.evaluate([TIGHT])[0].ok


@pytest.mark.parametrize("mode", ["generate", "graded"])
def test_the_full_cache_agrees_with_itself_and_a_tight_cache_less(tiny_loaded, prose, snapkv, instances, fidelity,
                                                                   mode):
    evaluator = LocalEvaluator(tiny_loaded, prose, instances, snapkv, records=fidelity.records, mode=mode)
    full, tight = evaluator.evaluate([FULL, TIGHT])
    assert full.ok and full.task_score == 1.0 and all(o.metric == o.score == 1.0 for o in full.instances)
    assert tight.ok and tight.task_score < 1.0
    for outcome in tight.instances:  # the metric is greedy_prefix; graded mode scores token_agreement
        assert outcome.generated_tokens > 0 and (outcome.score >= outcome.metric if mode == "graded"
                                                 else outcome.score == outcome.metric)


def test_a_failing_candidate_in_fidelity_mode_is_a_failure_not_a_score(fidelity):
    good, bad = fidelity.evaluate([FULL, np.zeros((4, 2), dtype=int)])
    assert good.ok and not bad.ok and bad.task_score is None and "budgets must be >=" in bad.error


def test_fidelity_scores_batch_like_one_at_a_time(tiny_loaded, prose, snapkv, instances, fidelity):
    budgets = [TIGHT, np.array([[40, 8], [24, 24], [12, 30], [16, 16]]), ROOMY]
    together = LocalEvaluator(tiny_loaded, prose, instances, snapkv, records=fidelity.records, mode="fidelity",
                              batch_size=5).evaluate(budgets)
    for budget, result in zip(budgets, together):
        alone = LocalEvaluator(tiny_loaded, prose, instances, snapkv, records=fidelity.records, mode="fidelity",
                               batch_size=1).evaluate([budget])[0]
        assert [o.score for o in result.instances] == pytest.approx([o.score for o in alone.instances], rel=1e-4)


def test_bounded_records_give_the_same_continuations_and_scores(tiny_loaded, prose, snapkv, instances, fidelity):
    from evolalloc.runtime.bounded import bound_record

    bounded = [bound_record(record, 24) for record in fidelity.records]
    for record in bounded:
        record.continuations = {}  # as a record mapped from disk by another process: none kept yet
    evaluator = LocalEvaluator(tiny_loaded, prose, instances, snapkv, records=bounded, mode="fidelity")
    for ours, whole in zip(evaluator._continuations, fidelity._continuations):
        assert torch.equal(ours.token_ids, whole.token_ids)
        torch.testing.assert_close(ours.full_logprobs, whole.full_logprobs, rtol=1e-5, atol=1e-5)
    for a, b in zip(evaluator.evaluate([TIGHT, FULL]), fidelity.evaluate([TIGHT, FULL])):
        assert a.task_score == pytest.approx(b.task_score, rel=1e-5)


@pytest.mark.parametrize("question_after_compression", [False, True])
def test_a_task_with_answers_gets_a_fidelity_score_too(tiny_loaded, passkey, snapkv, question_after_compression):
    from tests.engine.conftest import make_instances

    instances = make_instances(passkey, tiny_loaded.tokenizer, 2)
    evaluator = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, mode="fidelity",
                               question_after_compression=question_after_compression)
    full, tight = evaluator.evaluate([FULL, TIGHT])
    assert full.task_score == pytest.approx(1.0, abs=1e-6) and tight.task_score < 1.0
    # The continuation follows the question (fed after compression, or prefilled): the full cache's answer.
    answers = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, records=evaluator.records).evaluate([FULL])[0]
    assert [c.text for c in evaluator._continuations] == [o.prediction for o in answers.instances]


def test_a_prompts_file_searches_in_the_fidelity_mode_by_default(tiny_model_dir, tmp_path):
    import json

    from evolalloc.config.recipe import recipe_from_dict
    from evolalloc.pipeline.experiment import Experiment

    path = tmp_path / "prompts.jsonl"
    lines = [json.dumps({"id": i, "prompt": f"The keeper of lighthouse {i} climbed the stairs. " * 6 + "Then he"})
             for i in range(6)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    recipe = recipe_from_dict({
        "model": {"spec": str(tiny_model_dir)},
        "task": {"name": "jsonl_prompts", "params": {"path": str(path), "max_new_tokens": 6},
                 "search": {"n": 3}, "heldout": {"n": 3}},
        "scorer": {"name": "snapkv", "params": {"window": 8}},
        "budget": {"target": 16},
        "engine": {"threads": 1, "batch_size": 8},
        "baselines": ["uniform"],
    })
    with Experiment(recipe, progress=False) as experiment:
        assert experiment.resolved.fitness_mode == "fidelity-tokens" and not experiment.resolved.fitness_mode_given
        evaluator = experiment.search_evaluator()
        assert evaluator.mode == "fidelity-tokens"
        (result,) = evaluator.evaluate([FULL])
        heldout = experiment.evaluator("heldout").evaluate([FULL])[0]  # the comparison's generate mode
    assert result.ok and result.task_score == pytest.approx(1.0, abs=1e-6) and len(result.instances) == 3
    assert heldout.ok and heldout.task_score == 1.0 and all(o.mode == "generate" for o in heldout.instances)


def test_fidelity_under_budgets_held_while_decoding(tiny_loaded, prose, snapkv, instances):
    """``budget.decode``: the full cache's continuation is teacher-forced with the budgets held every
    ``interval`` tokens. Budgets that hold everything still score 1; held budgets score no higher than
    the same budgets applied to the prompt alone (the continuation's own tokens are evicted too)."""
    from evolalloc.core.decode_eviction import DecodeEviction

    held = LocalEvaluator(tiny_loaded, prose, instances, snapkv, mode="fidelity", decode=DecodeEviction(interval=4))
    prompt_only = LocalEvaluator(tiny_loaded, prose, instances, snapkv, mode="fidelity")
    full, tight = held.evaluate([FULL, TIGHT])
    assert full.ok and full.task_score == pytest.approx(1.0, abs=1e-6)
    (tight_prompt_only,) = prompt_only.evaluate([TIGHT])
    assert tight.ok and tight.task_score < 1.0
    assert tight.task_score < tight_prompt_only.task_score  # the held path scored it, and lost the evicted continuation


def test_greedy_answers_keep_their_greedy_prefix_beside_the_tasks_metric(tiny_loaded, prose, snapkv, instances,
                                                                         fidelity):
    from fitness import get_task

    by_prefix = LocalEvaluator(tiny_loaded, prose, instances, snapkv, records=fidelity.records)  # metric greedy_prefix
    full, tight = by_prefix.evaluate([FULL, TIGHT])
    assert all(o.greedy_prefix == 1.0 for o in full.instances)
    assert all(o.greedy_prefix == o.metric for o in tight.instances) and tight.instances[0].greedy_prefix < 1
    by_lcs = LocalEvaluator(tiny_loaded, get_task("continue_prose", max_new_tokens=12, metric="token_agreement"),
                            instances, snapkv, records=fidelity.records)
    (lcs,) = by_lcs.evaluate([TIGHT])
    assert [o.greedy_prefix for o in lcs.instances] == [o.metric for o in tight.instances]
    assert [o.metric for o in lcs.instances] != [o.metric for o in tight.instances]  # token_agreement scored
    assert all(o.greedy_prefix is None for o in fidelity.evaluate([TIGHT])[0].instances)  # nothing generated
