"""Trace importance equals the future attention read from the model's own attention weights."""

from __future__ import annotations

import torch

from evolalloc.learned.traces import trace_ids
from tests.runtime.conftest import random_prompt, tiny_model


def test_importance_is_the_future_attention_max_over_each_query_group():
    model = tiny_model("llama")
    eager = tiny_model("llama", attn="eager")
    ids = random_prompt(300, seed=2).tolist()
    splits, future = [50, 280], 32
    record = trace_ids(model, ids, splits, future)
    with torch.no_grad():
        out = eager(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False)
    assert record["keys"].shape == (3, 2, 300, 16) and record["keys"].dtype == torch.float16
    assert record["future"].tolist() == [32, 20]  # the last split runs out of tokens
    for s, n in enumerate(splits):
        for layer in range(3):
            attn = out.attentions[layer][0]  # [Hq, L, L]
            stop = min(n + future, 300)
            grouped = attn[:, n:stop, :n].view(2, 2, stop - n, n)  # 2 KV heads x 2 query heads each
            expected = grouped.amax(dim=1).sum(dim=1)
            assert torch.allclose(record["importance"][s][layer], expected, atol=1e-4)
