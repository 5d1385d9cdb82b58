"""The two kernels decode-time eviction runs at every eviction, against the plain formulas they replace."""

import pytest
import torch

from evolalloc.runtime.compress import gather_slots
from evolalloc.runtime.online_capture import attention_probabilities


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gather_slots_takes_each_heads_slots_as_an_expanded_gather_does(dtype):
    torch.manual_seed(0)
    stored = torch.randn(3, 2, 11, 5).to(dtype)  # [B, Hkv, S, D]
    slots = torch.randint(0, 11, (3, 2, 7))
    expected = stored.gather(2, slots[..., None].expand(-1, -1, -1, 5))
    assert torch.equal(gather_slots(stored, slots), expected)
    # A slice of a larger buffer (not contiguous) gives the same.
    buffer = torch.randn(3, 2, 16, 5).to(dtype)
    buffer[:, :, :11] = stored
    assert torch.equal(gather_slots(buffer[:, :, :11], slots), expected)
    assert torch.equal(gather_slots(buffer, slots), expected)


def _reference(query, key, visible, scaling, softcap=None):
    """Keys repeated per query head, the mask too: the definition."""
    n_rep = query.shape[1] // key.shape[1]
    keys = key.repeat_interleave(n_rep, dim=1)
    logits = query.float() @ keys.float().transpose(2, 3) * scaling
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    if visible is not None:
        mask = visible.repeat_interleave(n_rep, dim=1) if visible.dim() == 4 and visible.shape[1] > 1 else visible
        logits = logits.masked_fill(~mask, float("-inf"))
    return torch.softmax(logits, dim=-1).nan_to_num(0.0)


@pytest.mark.parametrize("mask", ["per_kv_head", "shared", "none", "two_dims"])
@pytest.mark.parametrize("softcap", [None, 5.0])
def test_attention_probabilities_match_repeated_keys_for_every_mask_shape(mask, softcap):
    torch.manual_seed(1)
    batch, kv_heads, n_rep, q, slots, dim = 2, 3, 3, 4, 9, 8
    query = torch.randn(batch, kv_heads * n_rep, q, dim)
    key = torch.randn(batch, kv_heads, slots, dim)
    visible = {"per_kv_head": torch.rand(batch, kv_heads, q, slots) > 0.4,
               "shared": torch.rand(batch, 1, q, slots) > 0.4,
               "none": None,
               "two_dims": torch.rand(q, slots) > 0.4}[mask]
    if visible is not None and visible.dim() == 4:
        visible[0, 0, 1] = False  # a query that sees nothing: a row of zeros
    got = attention_probabilities(query, key, visible, 0.3, softcap)
    assert got.shape == (batch, kv_heads * n_rep, q, slots)
    torch.testing.assert_close(got, _reference(query, key, visible, 0.3, softcap), rtol=1e-6, atol=1e-7)
    if visible is not None and visible.dim() == 4:
        assert torch.all(got[0, :n_rep, 1] == 0)
