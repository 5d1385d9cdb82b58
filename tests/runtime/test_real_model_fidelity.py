"""The fidelity fitness on the real bundled model (SmolLM2-135M-Instruct), prose to continue: the full
cache's continuation is transformers' own greedy output, the full cache keeps all of its likelihood
and agrees with itself, and a cache cut to SnapKV's window keeps less of both."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.engine.local import LocalEvaluator, prefill_instances, tokenize_instance
from evolalloc.runtime.attention import use_evolalloc_attention
from evolalloc.runtime.scorers import get_scorer

pytestmark = pytest.mark.real_model

SNAPKV = get_scorer("snapkv")


@pytest.fixture(scope="module")
def setup(bundled):
    from fitness import get_task

    task = get_task("continue_prose", max_new_tokens=24)
    instances = task.instances("heldout", 2, 0, 400, bundled.tokenizer)
    return task, instances, prefill_instances(bundled, instances, [SNAPKV])


def uniform(bundled, budget: int) -> np.ndarray:
    g = bundled.geometry
    return np.full((g.num_layers, g.num_kv_heads), budget)


def test_the_continuation_is_transformers_greedy_output(bundled, setup):
    task, instances, records = setup
    evaluator = LocalEvaluator(bundled, task, instances, SNAPKV, records=records, mode="fidelity")
    bundled.model.set_attn_implementation("sdpa")  # the stock model, stock attention
    try:
        for inst, continuation in zip(instances, evaluator._continuations):
            prompt = torch.tensor([tokenize_instance(bundled.tokenizer, inst, False)[0]])
            with torch.no_grad():
                stock = bundled.model.generate(prompt, max_new_tokens=24, do_sample=False)[0, prompt.shape[1]:]
            assert continuation.token_ids.tolist() == stock.tolist()
    finally:
        use_evolalloc_attention(bundled.model)


def test_the_full_cache_keeps_all_its_likelihood_and_agreement_and_a_window_keeps_less(bundled, setup):
    task, instances, records = setup
    full, window = uniform(bundled, 4096), uniform(bundled, SNAPKV.always_kept)
    kept = LocalEvaluator(bundled, task, instances, SNAPKV, records=records, mode="fidelity").evaluate([full, window])
    agreement = LocalEvaluator(bundled, task, instances, SNAPKV, records=records).evaluate([full, window])
    assert kept[0].task_score == pytest.approx(1.0, abs=1e-5) and agreement[0].task_score == 1.0
    assert kept[1].task_score < 0.95 and agreement[1].task_score < 1.0
