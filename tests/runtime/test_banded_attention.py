"""runtime/banded.py: a window's hidden key blocks skipped on the CPU, the output the same to the bit."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import evolalloc.runtime.masked_sdpa as masked_sdpa
from evolalloc.runtime.banded import KV_BLOCK, banded_attention, visible_span
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import random_prompt, tiny_model


def window_mask(length: int, queries: int, window: int, batch: int) -> torch.Tensor:
    """``[B, 1, q, S]``: the last ``queries`` positions of ``length``, each seeing its last ``window`` keys."""
    query_pos, key_pos = torch.arange(length - queries, length), torch.arange(length)
    seen = (key_pos[None, :] <= query_pos[:, None]) & (key_pos[None, :] > query_pos[:, None] - window)
    return seen[None, None].expand(batch, 1, queries, length)


class Recorded:
    """SDPA, keeping the key length of every call."""

    def __init__(self, n_rep: int):
        self.n_rep, self.key_lengths = n_rep, []

    def __call__(self, q, k, v, m):
        self.key_lengths.append(k.shape[2])
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=self.n_rep > 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [
    # (batch, query heads, KV heads, head size, keys, queries, window)
    (2, 4, 1, 32, 3072, 512, 512),    # a prefill chunk at the end of a long prompt (Gemma 3's window)
    (2, 4, 2, 32, 2048, 2048, 300),   # a one-shot prefill: four query blocks, each its own slice
    (3, 6, 3, 16, 1800, 512, 700),    # a window that is no multiple of the kernel's block
    (2, 2, 1, 32, 2600, 1, 512),      # a decode step (one query row for every query)
])
def test_the_banded_call_equals_one_call_over_every_key_to_the_bit(dtype, shape):
    batch, q_heads, kv_heads, dim, length, queries, window = shape
    gen = torch.Generator().manual_seed(0)
    query = torch.randn(batch, q_heads, queries, dim, generator=gen).to(dtype)
    key, value = (torch.randn(batch, kv_heads, length, dim, generator=gen).to(dtype) for _ in range(2))
    mask = window_mask(length, queries, window, batch)
    whole = Recorded(q_heads // kv_heads)(query, key, value, mask)
    attend = Recorded(q_heads // kv_heads)
    banded = banded_attention(attend, query, key, value, mask)
    assert banded is not None and max(attend.key_lengths) < length  # blocks were dropped: the test can fail
    assert torch.equal(banded, whole)


def test_the_visible_span_lies_on_the_kernels_block_boundaries():
    mask = torch.zeros(1, 1, 2, 3 * KV_BLOCK + 100, dtype=torch.bool)
    mask[0, 0, 0, KV_BLOCK + 7] = True
    mask[0, 0, 1, 2 * KV_BLOCK + 3] = True
    assert visible_span(mask) == (KV_BLOCK, 3 * KV_BLOCK)
    mask[0, 0, 1, 3 * KV_BLOCK + 50] = True
    assert visible_span(mask) == (KV_BLOCK, 3 * KV_BLOCK + 100)  # the last block ends with the keys
    assert visible_span(torch.zeros(1, 1, 1, 9, dtype=torch.bool)) is None


def test_a_mask_that_hides_no_whole_block_is_left_to_the_one_call():
    causal_chunk = window_mask(4 * KV_BLOCK, KV_BLOCK, 10**6, 1)  # the last chunk sees every earlier key
    q = torch.zeros(1, 1, KV_BLOCK, 8)
    kv = torch.zeros(1, 1, 4 * KV_BLOCK, 8)
    assert banded_attention(Recorded(1), q, kv, kv, causal_chunk) is None


def test_a_sliding_models_prefill_records_are_the_same_with_the_hidden_blocks_skipped(monkeypatch):
    """A tiny sliding-window model (window 24) over a 1600-token prompt, chunked as a long prompt is:
    the whole record — keys, values, SnapKV rankings and scores, the first logits — equal to the bit."""
    model = tiny_model("mistral-sliding", max_position_embeddings=4096)
    prompt = random_prompt(1600, seed=7)
    scorer = get_scorer("snapkv")
    calls = []
    real = masked_sdpa.banded_attention

    def counting(*args):
        out = real(*args)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(masked_sdpa, "banded_attention", counting)
    banded = prefill(model, prompt, [scorer], chunk_size=512)
    assert sum(calls) > 0
    monkeypatch.setattr(masked_sdpa, "banded_attention", lambda *args: None)
    whole = prefill(model, prompt, [scorer], chunk_size=512)
    for a, b in zip(banded.keys + banded.values, whole.keys + whole.values):
        assert torch.equal(a, b)
    assert torch.equal(banded.first_logits, whole.first_logits)
    assert torch.equal(banded.rankings[scorer.key], whole.rankings[scorer.key])
    assert torch.equal(banded.scores[scorer.key], whole.scores[scorer.key])
