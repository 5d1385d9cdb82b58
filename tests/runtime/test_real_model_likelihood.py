"""The likelihood fitness on the real bundled model (SmolLM2-135M-Instruct), passkey at ~1k tokens:
exact against the stock model when nothing is evicted, and it falls when the cache shrinks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.engine.local import LocalEvaluator, prefill_instances
from evolalloc.runtime.attention import use_evolalloc_attention
from evolalloc.runtime.likelihood import reference_logprobs
from evolalloc.runtime.scorers import get_scorer

pytestmark = pytest.mark.real_model

SNAPKV = get_scorer("snapkv")


@pytest.fixture(scope="module")
def setup(bundled):
    from fitness import get_task

    task = get_task("passkey")
    instances = task.instances("search", 4, 0, 1000, bundled.tokenizer)
    return task, instances, prefill_instances(bundled, instances, [SNAPKV])


def uniform(bundled, budget: int) -> np.ndarray:
    g = bundled.geometry
    return np.full((g.num_layers, g.num_kv_heads), budget)


def test_with_the_full_cache_the_reference_gets_the_stock_models_probabilities(bundled, setup):
    task, instances, records = setup
    tok = bundled.tokenizer
    inst, record = instances[0], records[0]
    prompt = tok.encode(inst.prompt)
    (continuation,) = task.reference_continuations(inst)
    ref = tok.encode(continuation, add_special_tokens=False)
    (ours,) = reference_logprobs(bundled.model, [(record, uniform(bundled, 4096), torch.tensor(ref))], SNAPKV)
    bundled.model.set_attn_implementation("sdpa")  # the stock model, stock attention
    try:
        with torch.no_grad():
            logits = bundled.model(input_ids=torch.tensor([prompt + ref])).logits[0, len(prompt) - 1 : -1].float()
    finally:
        use_evolalloc_attention(bundled.model)
    stock = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(ref)[:, None])[:, 0]
    torch.testing.assert_close(ours, stock, rtol=1e-5, atol=1e-5)
    evaluator = LocalEvaluator(bundled, task, instances[:1], SNAPKV, records=records[:1], mode="likelihood")
    assert evaluator.evaluate([uniform(bundled, 4096)])[0].task_score == pytest.approx(float(stock.exp().mean()),
                                                                                       abs=1e-5)


def test_the_likelihood_score_falls_as_the_cache_shrinks(bundled, setup):
    task, instances, records = setup
    evaluator = LocalEvaluator(bundled, task, instances, SNAPKV, records=records, mode="likelihood")
    tiny, mid, full = (r.task_score
                       for r in evaluator.evaluate([uniform(bundled, b) for b in (SNAPKV.always_kept, 128, 4096)]))
    # The full cache answers these prompts; keeping only the observation window cannot.
    assert full > 0.9 and full > mid > tiny, (tiny, mid, full)
