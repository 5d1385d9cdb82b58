"""``masked_attention`` (the evicted cache's masked attention) equals plain attention over each query
head's own group: folded for one query token, repeated for several."""

from __future__ import annotations

import pytest
import torch

from evolalloc.runtime.masked_sdpa import masked_attention


def _reference(query, key, value, mask, scaling):
    """Per query head: softmax over its group's visible keys, in float64."""
    n_rep = query.shape[1] // key.shape[1]
    k = key.double().repeat_interleave(n_rep, dim=1)
    v = value.double().repeat_interleave(n_rep, dim=1)
    m = mask.expand(query.shape[0], key.shape[1], query.shape[2], key.shape[2]).repeat_interleave(n_rep, dim=1)
    logits = (query.double() @ k.transpose(-1, -2)) * scaling
    return torch.softmax(logits.masked_fill(~m, float("-inf")), dim=-1) @ v


@pytest.mark.parametrize("decode_path", [True, False])
@pytest.mark.parametrize("q_len", [1, 3])
@pytest.mark.parametrize("kv_heads,q_heads", [(2, 8), (4, 4), (1, 3)])
def test_masked_attention_matches_each_heads_own_attention(q_len, kv_heads, q_heads, decode_path):
    generator = torch.Generator().manual_seed(q_len * 10 + q_heads)
    batch, keys, dim = 3, 11, 8
    query = torch.randn(batch, q_heads, q_len, dim, generator=generator)
    key = torch.randn(batch, kv_heads, keys, dim, generator=generator)
    value = torch.randn(batch, kv_heads, keys, dim, generator=generator)
    mask = torch.rand(batch, kv_heads, q_len, keys, generator=generator) > 0.4  # per KV head, ragged
    mask[..., -1] = True  # every query sees at least its own token
    out = masked_attention(query, key, value, mask, scaling=dim**-0.5, decode_path=decode_path)
    assert out.shape == (batch, q_heads, q_len, dim)
    torch.testing.assert_close(out.double(), _reference(query, key, value, mask, dim**-0.5), rtol=1e-5, atol=1e-5)


def test_a_head_that_another_group_sees_differently_is_not_mixed_up():
    """Group 0 sees only key 0, group 1 only key 1: folding must keep each query head on its group."""
    key = torch.zeros(1, 2, 2, 4)
    value = torch.tensor([[[[1.0, 0, 0, 0], [0, 1.0, 0, 0]], [[0, 0, 1.0, 0], [0, 0, 0, 1.0]]]])
    mask = torch.tensor([[[[True, False]], [[False, True]]]])  # [1, 2, 1, 2]
    out = masked_attention(torch.randn(1, 4, 1, 4), key, value, mask, scaling=1.0, decode_path=True)
    assert out[0, :2, 0].tolist() == [[1.0, 0, 0, 0]] * 2 and out[0, 2:, 0].tolist() == [[0, 0, 0, 1.0]] * 2


@pytest.mark.parametrize("kv_heads,q_heads", [(2, 8), (4, 4)])
def test_a_decode_step_without_a_mask_sees_every_key(kv_heads, q_heads):
    """A layer whose heads all keep the same count has no mask; its GPU decode step takes this path too."""
    generator = torch.Generator().manual_seed(q_heads)
    query = torch.randn(2, q_heads, 1, 8, generator=generator)
    key, value = torch.randn(2, 2, kv_heads, 9, 8, generator=generator)
    out = masked_attention(query, key, value, None, scaling=8**-0.5, decode_path=True)
    every_key = torch.ones(2, kv_heads, 1, 9, dtype=torch.bool)
    torch.testing.assert_close(out.double(), _reference(query, key, value, every_key, 8**-0.5), rtol=1e-5, atol=1e-5)


def test_unmasked_gpu_decode_steps_are_routed_off_sdpas_own_choice(monkeypatch):
    """Decoding with full budgets (no layer masked): on a GPU each step goes to the cuDNN-free path (here the
    CPU stands in for it), with the same tokens as SDPA's own choice. A third GPU call found those steps on
    cuDNN, which built a plan per new key length: 27 s for what took 0.65 s once the plans existed."""
    import numpy as np

    import evolalloc.runtime.attention as attention
    from evolalloc.runtime.decode import DecodeSettings, generate
    from evolalloc.runtime.prefill import prefill
    from evolalloc.runtime.scorers import get_scorer
    from tests.runtime.conftest import random_prompt, tiny_model

    model, scorer = tiny_model("llama"), get_scorer("snapkv", window=8)
    record = prefill(model, random_prompt(40), [scorer])
    budgets = np.full((model.config.num_hidden_layers, model.config.num_key_value_heads), 40)  # every slot valid
    settings = DecodeSettings(max_new_tokens=6)
    (plain,) = generate(model, [(record, budgets)], scorer, settings, None)

    calls = []

    def spy(query, key, value, mask, scaling, **kwargs):
        calls.append(mask is None)
        return masked_attention(query, key, value, mask, scaling, decode_path=True)

    monkeypatch.setattr(attention, "folded_decode_step", lambda query: query.shape[2] == 1)
    monkeypatch.setattr(attention, "masked_attention", spy)
    (routed,) = generate(model, [(record, budgets)], scorer, settings, None)
    assert calls and all(calls), "every decode step, mask-free, went to the cuDNN-free path"
    assert routed.token_ids == plain.token_ids


def test_the_cpu_folds_a_half_precision_decode_step_and_keeps_float32_on_sdpas_own_call():
    """bfloat16 on the CPU: SDPA's call with one query token was 6x slower than the folded one, so it folds;
    float32 keeps SDPA's own call (no gain there, and its results stay bit-identical with earlier runs)."""
    from evolalloc.runtime.masked_sdpa import folded_decode_step

    one, several = torch.zeros(2, 9, 1, 64), torch.zeros(2, 9, 4, 64)
    assert folded_decode_step(one.bfloat16()) and folded_decode_step(one.half())
    assert not folded_decode_step(one) and not folded_decode_step(several.bfloat16())


@pytest.mark.parametrize("masked", [True, False])
def test_a_folded_bfloat16_decode_step_on_the_cpu_is_each_heads_own_attention(masked):
    generator = torch.Generator().manual_seed(7)
    query = torch.randn(4, 9, 1, 64, generator=generator)
    key, value = torch.randn(2, 4, 3, 300, 64, generator=generator)
    mask = torch.rand(4, 3, 1, 300, generator=generator) > 0.3 if masked else None
    expected = _reference(query.bfloat16().float(), key.bfloat16().float(), value.bfloat16().float(),
                          mask if masked else torch.ones(4, 3, 1, 300, dtype=torch.bool), 0.125)
    out = masked_attention(query.bfloat16(), key.bfloat16(), value.bfloat16(), mask, scaling=0.125)  # route: default
    assert out.dtype == torch.bfloat16 and out.shape == (4, 9, 1, 64)
    torch.testing.assert_close(out.double(), expected, rtol=0.02, atol=0.01)  # bfloat16's own rounding


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_several_query_tokens_on_the_cpu_fold_to_the_same_bits_as_sdpas_grouped_call(dtype):
    """An answer fed over the evicted cache (the search's likelihood): folded onto the KV groups, the mask not
    repeated to every query head; the same numbers as SDPA's own call with the mask per query head."""
    import torch.nn.functional as F

    from evolalloc.runtime.masked_sdpa import per_query_head

    generator = torch.Generator().manual_seed(3)
    query = torch.randn(4, 9, 8, 64, generator=generator).to(dtype)
    key, value = torch.randn(2, 4, 3, 200, 64, generator=generator).to(dtype)
    mask = torch.rand(4, 3, 8, 200, generator=generator) > 0.3
    mask[..., -8:] = torch.ones(8, 8, dtype=torch.bool).tril()  # the fed tokens see themselves causally
    out = masked_attention(query, key, value, mask, scaling=0.125)
    grouped = F.scaled_dot_product_attention(query, key, value, attn_mask=per_query_head(mask, 3), scale=0.125,
                                             enable_gqa=True)
    assert torch.equal(out, grouped)
