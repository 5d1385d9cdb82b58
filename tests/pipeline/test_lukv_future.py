"""LU-KV's profiling feeds the future tokens over the prefill record (``future_attention_after``) instead of
running context + future through the model again (``future_attention``): the same attention up to float
rounding, on every attention kind the runtime supports (full, sliding windows, soft-capped)."""

from __future__ import annotations

import pytest
import torch

from evolalloc.pipeline.lukv import _same_tokens, future_attention, future_attention_after
from evolalloc.runtime.bounded import bound_record
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import DTYPE, random_prompt, tiny_model

# float32: the two paths differ in summation order only; 16-bit (EVOLALLOC_TEST_DTYPE): a few ulps of each weight
CLOSE = dict(rtol=1e-4, atol=1e-5) if DTYPE == torch.float32 else dict(rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("architecture", ["llama", "mistral-sliding", "gemma2-softcap", "gemma3"])
def test_future_fed_over_the_record_gives_the_attention_of_one_forward(architecture):
    model = tiny_model(architecture)
    context, future = random_prompt(60, seed=1), random_prompt(5, seed=2)  # 60 > the sliding window of 24
    record = prefill(model, context, [get_scorer("snapkv", window=8)])
    want = future_attention(model, context, future)
    got = future_attention_after(model, record, future)
    assert got.shape == want.shape == (3, 2, 60)
    torch.testing.assert_close(got, want, **CLOSE)
    assert want.sum() > 0.1  # the context does get attention: a comparison of zeros would pass anyway


def test_a_bounded_record_is_refused():
    model = tiny_model("llama")
    record = prefill(model, random_prompt(40), [get_scorer("snapkv", window=8)])
    with pytest.raises(ValueError, match="bounded"):
        future_attention_after(model, bound_record(record, 10), random_prompt(3, seed=2))


def test_a_record_of_other_tokens_is_not_taken_for_the_context():
    model = tiny_model("llama")
    context = random_prompt(30, seed=1)
    record = prefill(model, context, [get_scorer("snapkv", window=8)])
    assert _same_tokens(record, context.tolist())
    other = context.clone()
    other[5] += 1
    assert not _same_tokens(record, other) and not _same_tokens(record, context[:-1])
