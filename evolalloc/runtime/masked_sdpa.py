"""Attention with a per-KV-head mask (decoding on an evicted cache), fast on a GPU.

Two things the GPU check (issue 36, results/gpu-check/) showed about
``F.scaled_dot_product_attention`` with a mask on an H200 (torch 2.11):

* it picked cuDNN's attention, which builds an execution plan for every new shape. An evicted
  cache's width differs from batch to batch (it is the batch's largest head budget), so nearly every
  batch paid the plan builds: a batch of 16 rows took seconds where its kernels took 0.14 s. Here the
  masked call runs with cuDNN's backend off, so the memory-efficient kernel (which takes a mask and
  builds nothing) serves it. ``EVOLALLOC_SDPA_CUDNN=1`` keeps cuDNN (the old behaviour, for the
  side-by-side measurement in ``benchmarks/gpu_fix_check.sh``).
* a grouped-query model's mask is per KV head, and repeating it (and the keys) to the query heads
  costs copies. For one query token the ``n_rep`` query heads of a group are folded into the query
  length instead: ``[B, Hq, 1, D]`` -> ``[B, Hkv, n_rep, D]`` against the group's own keys, the mask
  broadcast over the folded axis. Each query head still sees exactly its group's keys and mask, so
  the result is the same attention (heads are independent); nothing is copied.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

_KEEP_CUDNN = os.environ.get("EVOLALLOC_SDPA_CUDNN", "") == "1"


def masked_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor,
                     scaling: float) -> torch.Tensor:
    """Masked attention; returns ``[B, Hq, q, D]``.

    Shapes: query ``[B, Hq, q, D]``; key, value ``[B, Hkv, S, D]``; ``mask`` bool (True = visible),
    broadcastable to ``[B, Hkv, q, S]`` — per KV head (dim 1 of size ``Hkv`` or 1), not per query head.
    """
    batch, q_heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    n_rep = q_heads // kv_heads
    if q_len == 1 and n_rep > 1:
        folded = query.reshape(batch, kv_heads, n_rep, dim)  # query head h = group h // n_rep, as repeat_interleave
        out = _sdpa(folded, key, value, mask, scaling, gqa=False)  # mask [B, Hkv|1, 1, S] broadcasts over n_rep
        return out.reshape(batch, q_heads, 1, dim)
    if mask.dim() == 4 and mask.shape[1] > 1 and n_rep > 1:
        mask = mask.repeat_interleave(n_rep, dim=1)  # several query tokens: each needs its own causal row
    return _sdpa(query, key, value, mask, scaling, gqa=n_rep > 1)


def _sdpa(query, key, value, mask, scaling, *, gqa: bool) -> torch.Tensor:
    if _KEEP_CUDNN or query.device.type != "cuda" or not torch.backends.cuda.cudnn_sdp_enabled():
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling, enable_gqa=gqa)
    # Two flag flips, cheaper than the ``sdpa_kernel`` context manager on every layer of every step.
    # The flag is process-wide: a thread calling SDPA meanwhile may skip cuDNN too (still exact).
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling, enable_gqa=gqa)
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)
