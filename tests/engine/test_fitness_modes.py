"""``LocalEvaluator`` in its three fitness modes, on the tiny random Llama folder with the real
tokenizer: likelihood scores equal the stock model's teacher-forced probabilities when nothing is
evicted, graded mode re-scores the same answers, and a bad mode or a failing row is an error."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.engine.local import LocalEvaluator, tokenize_instance
from tests.engine.conftest import allocations, make_instances

FULL = np.full((4, 2), 4096)  # more than any prompt: nothing is evicted


@pytest.fixture(scope="module")
def stock(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="sdpa", dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def instances(tiny_loaded, passkey):
    return make_instances(passkey, tiny_loaded.tokenizer, 3)


def stock_mean_probability(stock, tokenizer, prefix: list[int], continuation: str) -> float:
    ref = tokenizer.encode(continuation, add_special_tokens=False)
    ids = torch.tensor([prefix + ref])
    with torch.no_grad():
        logp = torch.log_softmax(stock(input_ids=ids).logits[0, len(prefix) - 1 : -1].float(), dim=-1)
    return float(logp.gather(1, torch.tensor(ref)[:, None]).exp().mean())


@pytest.mark.parametrize("question_after_compression", [False, True])
def test_with_nothing_evicted_the_likelihood_score_is_the_stock_models_mean_token_probability(
        tiny_loaded, passkey, snapkv, instances, stock, question_after_compression):
    tok = tiny_loaded.tokenizer
    evaluator = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, mode="likelihood",
                               question_after_compression=question_after_compression)
    (result,) = evaluator.evaluate([FULL])
    assert result.ok
    for inst, outcome in zip(instances, result.instances):
        ids, question = tokenize_instance(tok, inst, question_after_compression)
        (continuation,) = passkey.reference_continuations(inst)
        expected = stock_mean_probability(stock, tok, ids + (question or []), continuation)
        # A random model spreads its probability thin (~1/vocab): compare relatively.
        assert outcome.score == pytest.approx(expected, rel=1e-4, abs=0)
        assert outcome.metric == outcome.score and outcome.prediction == "" and outcome.mode == "likelihood"
    assert result.task_score == pytest.approx(np.mean([o.score for o in result.instances]))


def test_likelihood_scores_differ_between_allocations_and_batch_like_one_at_a_time(tiny_loaded, passkey, snapkv,
                                                                                   instances):
    evaluator = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, mode="likelihood", batch_size=5)
    budgets = allocations()
    together = evaluator.evaluate(budgets)
    alone = [LocalEvaluator(tiny_loaded, passkey, instances, snapkv, mode="likelihood", batch_size=1,
                            records=evaluator.records).evaluate([b])[0] for b in budgets]
    for a, b in zip(together, alone):
        assert [o.score for o in a.instances] == pytest.approx([o.score for o in b.instances], rel=1e-4, abs=0)
    for a, b in zip(together, together[1:]):  # each allocation keeps other tokens, so scores move
        assert a.task_score != pytest.approx(b.task_score, rel=1e-3, abs=0)


def test_several_continuations_score_as_the_best_one(tiny_loaded, passkey, snapkv, instances):
    class Fixed(type(passkey)):
        def __init__(self, wrong: bool, right: bool):
            super().__init__()
            self.wrong, self.right = wrong, right

        def reference_continuations(self, instance):
            return (" 00000",) * self.wrong + super().reference_continuations(instance) * self.right

    def scores(task):
        evaluator = LocalEvaluator(tiny_loaded, task, instances, snapkv, mode="likelihood")
        return [o.score for o in evaluator.evaluate([allocations()[1]])[0].instances]

    both, right, wrong = scores(Fixed(True, True)), scores(Fixed(False, True)), scores(Fixed(True, False))
    assert both == pytest.approx(np.maximum(right, wrong), rel=1e-6, abs=0)
    assert right != pytest.approx(wrong, rel=1e-3, abs=0)


def test_graded_mode_scores_the_same_answers_with_the_graded_score(tiny_loaded, passkey, snapkv, instances):
    generated = LocalEvaluator(tiny_loaded, passkey, instances, snapkv).evaluate(allocations()[:2])
    graded = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, mode="graded").evaluate(allocations()[:2])
    for g, r in zip(generated, graded):
        for inst, go, ro in zip(instances, g.instances, r.instances):
            assert ro.prediction == go.prediction and ro.metric == go.metric and ro.mode == "graded"
            assert ro.score == passkey.graded_score(inst, go.prediction) >= go.score


def test_an_unknown_mode_is_refused_with_the_valid_ones(tiny_loaded, passkey, snapkv, instances, tiny_model_dir):
    from evolalloc.pipeline.experiment import Experiment
    from tests.engine.test_factory import recipe

    with pytest.raises(ValueError, match="valid modes: generate, graded, likelihood"):
        LocalEvaluator(tiny_loaded, passkey, instances, snapkv, mode="teacher-forced")
    with Experiment(recipe(tiny_model_dir), progress=False) as experiment:
        with pytest.raises(ValueError, match="unknown fitness mode 'exact'"):
            experiment.evaluator("search", mode="exact")


def test_a_failing_candidate_in_likelihood_mode_is_a_failure_not_a_score(tiny_loaded, passkey, snapkv, instances):
    evaluator = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, mode="likelihood")
    good, bad = evaluator.evaluate([FULL, np.zeros((4, 2), dtype=int)])
    assert good.ok and not bad.ok and bad.task_score is None and "budgets must be >=" in bad.error


def test_the_experiment_hands_its_mode_to_the_evaluator(tiny_model_dir):
    from evolalloc.pipeline.experiment import Experiment
    from tests.engine.test_factory import recipe

    with Experiment(recipe(tiny_model_dir), progress=False) as experiment:
        evaluator = experiment.evaluator("search", mode="likelihood")
        assert isinstance(evaluator, LocalEvaluator) and evaluator.mode == "likelihood"
        (result,) = evaluator.evaluate(allocations()[:1])
    assert result.ok and all(o.mode == "likelihood" and 0 < o.score <= 1 for o in result.instances)
