"""Decode-time eviction on the real bundled model (SmolLM2-135M-Instruct): budgets that hold everything
give transformers' greedy tokens, and a long answer under small budgets never stores more than it may."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.test_decode_eviction import held_counts

pytestmark = pytest.mark.real_model

PROSE = ("The lighthouse keeper climbed the stairs each evening, counting the steps as his father had taught him. "
         "Below, the harbour emptied as the boats came in, and the gulls settled on the breakwater. ") * 6


def test_budgets_that_hold_everything_give_transformers_greedy_tokens(bundled):
    from transformers import AutoModelForCausalLM

    ids = bundled.tokenizer.encode(PROSE)
    folder = bundled.model.config.name_or_path
    stock = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa").eval()
    expected = stock.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False, eos_token_id=None,
                              pad_token_id=0)[0, len(ids):].tolist()
    budgets = np.full((bundled.geometry.num_layers, bundled.geometry.num_kv_heads), len(ids) + 40)
    for name in ("snapkv", "h2o"):
        scorer = get_scorer(name)
        record = prefill(bundled.model, ids, [scorer])
        (held,) = generate(bundled.model, [(record, budgets)], scorer, DecodeSettings(max_new_tokens=40),
                           decode=DecodeEviction(8))
        assert held.token_ids == expected, name


def test_a_230_token_answer_under_budgets_of_48_never_stores_more_than_budget_plus_interval_minus_one(bundled):
    scorer = get_scorer("snapkv", window=16)
    record = prefill(bundled.model, bundled.tokenizer.encode(PROSE), [scorer])
    budgets = np.full((bundled.geometry.num_layers, bundled.geometry.num_kv_heads), 48)
    budgets[::3] = 24  # per-layer budgets, well below prompt + answer
    counts, _, cache = held_counts(bundled.model, [(record, budgets)], scorer, steps=230, interval=16)
    limit = torch.as_tensor(budgets) + 15
    assert counts.shape[0] == 229 and bool((counts[:, 0] <= limit).all())
    assert torch.equal(counts[:, 0].amax(dim=0), limit)  # reached: the budgets are held, not undercut
    assert cache.held.evictions == 229 // 16
