"""The evicted-cache runtime is exact: full budgets reproduce the stock model, cached records
reproduce prefill-from-scratch, batching reproduces one-at-a-time."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import LOGITS_CLOSE, random_prompt, tiny_model


def reference_generation(model, ids: torch.Tensor, steps: int):
    out = model.generate(
        ids[None], max_new_tokens=steps, do_sample=False, output_logits=True,
        return_dict_in_generate=True, eos_token_id=None, pad_token_id=0,
    )
    return out.sequences[0, ids.shape[0]:].tolist(), [step[0] for step in out.logits]


@pytest.mark.parametrize("architecture", ["llama", "mistral", "qwen2"])
def test_full_budgets_reproduce_the_stock_model_for_every_scorer(architecture, scorers):
    model, stock = tiny_model(architecture), tiny_model(architecture, attn="sdpa")
    ids = random_prompt(90, seed=1)
    tokens, logits = reference_generation(stock, ids, steps=8)
    record = prefill(model, ids, scorers)
    for scorer in scorers:
        budgets = np.full((3, 2), 200)  # more than the prompt: nothing is evicted
        (gen,) = generate(model, [(record, budgets)], scorer, DecodeSettings(max_new_tokens=8, keep_logits=True))
        assert gen.token_ids == tokens, scorer.name
        for ours, theirs in zip(gen.logits, logits):
            torch.testing.assert_close(ours, theirs.float().cpu(), **LOGITS_CLOSE)


def test_a_cached_record_decodes_like_prefilling_and_compressing_from_scratch(llama):
    ids = random_prompt(120, seed=2)
    scorer = get_scorer("snapkv", window=8)
    settings = DecodeSettings(max_new_tokens=10)
    cached = prefill(llama, ids, [scorer, get_scorer("knorm")])
    rng = np.random.default_rng(0)
    for _ in range(4):
        budgets = rng.integers(8, 60, size=(3, 2))
        (from_cache,) = generate(llama, [(cached, budgets)], scorer, settings)
        (from_scratch,) = generate(llama, [(prefill(llama, ids, [scorer]), budgets)], scorer, settings)
        assert from_cache.token_ids == from_scratch.token_ids


def test_batched_rows_decode_like_one_row_at_a_time(llama):
    scorer = get_scorer("snapkv", window=8)
    records = [prefill(llama, random_prompt(n, seed=n), [scorer]) for n in (70, 95, 130)]
    rng = np.random.default_rng(1)
    rows = [(r, rng.integers(8, 50, size=(3, 2))) for r in records for _ in range(2)]
    settings = DecodeSettings(max_new_tokens=9, keep_logits=True)
    batched = generate(llama, rows, scorer, settings, batch_size=len(rows))
    for row, together in zip(rows, batched):
        (alone,) = generate(llama, [row], scorer, settings)
        assert together.token_ids == alone.token_ids
        for a, b in zip(together.logits, alone.logits):
            torch.testing.assert_close(a, b, **LOGITS_CLOSE)


def test_rows_that_finish_early_leave_the_batch_without_changing_the_others(llama):
    scorer = get_scorer("knorm")
    record = prefill(llama, random_prompt(60, seed=5), [scorer])
    (probe,) = generate(llama, [(record, np.full(3, 30))], scorer, DecodeSettings(max_new_tokens=6))
    eos = probe.token_ids[2]  # make the third token an EOS for this row only
    rows = [(record, np.full(3, 30)), (record, np.full(3, 12))]
    both = generate(llama, rows, scorer, DecodeSettings(max_new_tokens=6, eos_ids=(eos,)), batch_size=2)
    assert both[0].stopped_by == "eos" and both[0].token_ids == probe.token_ids[:3]
    (second,) = generate(llama, [rows[1]], scorer, DecodeSettings(max_new_tokens=6, eos_ids=(eos,)))
    assert both[1].token_ids == second.token_ids
