"""The ``agreement`` fitness mode, on the tiny random Llama folder with the real tokenizer: a greedy
answer scored by its token agreement with the full cache's own greedy continuation, for a task with
answers of its own (passkey) as for one judged against the full cache (continue_prose, where it must
give exactly what that task's generate mode gives with the same metric); budgets held while decoding too."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.engine.local import LocalEvaluator
from tests.engine.conftest import CONTEXT_TOKENS, allocations, make_instances

FULL = np.full((4, 2), 4096)  # more than any prompt: nothing is evicted


@pytest.fixture(scope="module")
def passkey_agreement(tiny_loaded, passkey, snapkv):
    return LocalEvaluator(tiny_loaded, passkey, make_instances(passkey, tiny_loaded.tokenizer, 3), snapkv,
                          mode="agreement")


def test_the_full_cache_agrees_with_itself_and_keeps_the_tasks_own_score_as_metric(passkey_agreement, passkey):
    (result,) = passkey_agreement.evaluate([FULL])
    assert result.ok and result.task_score == 1.0
    assert all(o.mode == "agreement" and o.score == 1.0 and o.greedy_prefix == 1.0 for o in result.instances)
    # metric: what the task's own metric makes of the same answer (the random model misses every pass key)
    own = [passkey.score(inst, o.prediction)[1] for inst, o in zip(passkey_agreement.instances, result.instances)]
    assert [o.metric for o in result.instances] == own == [0.0] * len(own)


def test_a_compressed_answer_is_scored_against_the_continuation_not_the_answer(passkey_agreement):
    results = passkey_agreement.evaluate(allocations())
    assert all(r.ok for r in results)
    scores = [o.score for r in results for o in r.instances]
    assert min(scores) < 1.0  # some budget changes what the random model writes
    for result in results:
        for i, outcome in enumerate(result.instances):
            reference = passkey_agreement._continuations[i]
            # The answer's text is the continuation's text exactly when the score is 1.
            assert (outcome.score == 1.0) == (outcome.prediction == reference.text)
            assert 0.0 <= outcome.greedy_prefix <= outcome.score <= 1.0


@pytest.mark.parametrize("decode", [None, DecodeEviction(interval=2)], ids=["prompt-only", "held-while-decoding"])
def test_on_a_task_judged_against_the_full_cache_it_scores_what_generate_scores(tiny_loaded, snapkv, decode):
    from fitness import get_task

    prose = get_task("continue_prose", max_new_tokens=12, metric="token_agreement")
    instances = prose.instances("search", 3, 0, CONTEXT_TOKENS, tiny_loaded.tokenizer)
    agreement = LocalEvaluator(tiny_loaded, prose, instances, snapkv, mode="agreement", decode=decode)
    generate = LocalEvaluator(tiny_loaded, prose, instances, snapkv, records=agreement.records, mode="generate",
                              decode=decode)
    mine, theirs = agreement.evaluate(allocations()), generate.evaluate(allocations())
    assert min(o.score for r in mine for o in r.instances) < 1.0  # the tight budgets change some answers
    for a, b in zip(mine, theirs):
        assert [(o.prediction, o.metric, o.score, o.greedy_prefix) for o in a.instances] == \
               [(o.prediction, o.metric, o.score, o.greedy_prefix) for o in b.instances]


def test_a_task_judged_against_the_full_cache_keeps_its_own_metric_as_the_metric(tiny_loaded, snapkv):
    """continue_prose's default metric is greedy_prefix: the agreement mode's metric is that one."""
    from fitness import get_task

    prose = get_task("continue_prose", max_new_tokens=12)
    instances = prose.instances("search", 3, 0, CONTEXT_TOKENS, tiny_loaded.tokenizer)
    agreement = LocalEvaluator(tiny_loaded, prose, instances, snapkv, mode="agreement")
    generate = LocalEvaluator(tiny_loaded, prose, instances, snapkv, records=agreement.records, mode="generate")
    for mine, theirs in zip(agreement.evaluate(allocations()), generate.evaluate(allocations())):
        assert [o.metric for o in mine.instances] == [o.score for o in theirs.instances]
        assert [o.metric for o in mine.instances] == [o.greedy_prefix for o in mine.instances]
