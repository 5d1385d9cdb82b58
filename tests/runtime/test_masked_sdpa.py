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
