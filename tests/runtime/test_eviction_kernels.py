"""The two kernels decode-time eviction runs at every eviction, against the plain formulas they replaced
(``benchmarks/eviction_kernels_check.py`` times both on a recipe)."""

import pytest
import torch

from evolalloc.runtime.compress import gather_slots
from evolalloc.runtime.online_capture import attention_probabilities
from tests.benchscripts import load_benchmark

PLAIN = load_benchmark("eviction_kernels_check")  # the plain formulas the kernels replaced


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gather_slots_takes_each_heads_slots_as_an_expanded_gather_does(dtype):
    torch.manual_seed(0)
    stored = torch.randn(3, 2, 11, 5).to(dtype)  # [B, Hkv, S, D]
    slots = torch.randint(0, 11, (3, 2, 7))
    expected = PLAIN.plain_gather_slots(stored, slots)
    assert torch.equal(gather_slots(stored, slots), expected)
    # A slice of a larger buffer (not contiguous) gives the same.
    buffer = torch.randn(3, 2, 16, 5).to(dtype)
    buffer[:, :, :11] = stored
    assert torch.equal(gather_slots(buffer[:, :, :11], slots), expected)
    assert torch.equal(gather_slots(buffer, slots), expected)


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
    expected = PLAIN.plain_attention_probabilities(query, key, visible, 0.3, softcap)
    # Close, not bitwise: a product per KV group may block its sums otherwise than one over repeated keys
    # (whole searches' scores came out bitwise equal: benchmarks/eviction_kernels_check.py prints it).
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)
    if visible is not None and visible.dim() == 4:
        assert torch.all(got[0, :n_rep, 1] == 0)
