"""Attention with a per-KV-head mask (decoding on an evicted cache), fast on a GPU.

Two things the GPU check (issue 36, results/gpu-check/) showed about
``F.scaled_dot_product_attention`` with a mask on an H200 (torch 2.11):

* it picked cuDNN's attention, which builds an execution plan for every new shape. An evicted
  cache's width differs from batch to batch (it is the batch's largest head budget), so nearly every
  batch paid the plan builds: a batch of 16 rows took seconds where its kernels took 0.14 s. Here a
  decode step (one query token) runs with cuDNN's backend off, so the memory-efficient kernel (which
  takes a mask and builds nothing) serves it. Calls with several query tokens (prefill chunks) keep
  SDPA's own choice: their shapes recur, and there cuDNN was twice as fast. ``EVOLALLOC_SDPA_CUDNN=1``
  keeps cuDNN (the old behaviour, for the side-by-side measurement in ``benchmarks/gpu_fix_check.sh``).
* a grouped-query model's mask is per KV head, and repeating it (and the keys) to the query heads
  costs copies. For one query token the ``n_rep`` query heads of a group are folded into the query
  length instead: ``[B, Hq, 1, D]`` -> ``[B, Hkv, n_rep, D]`` against the group's own keys, the mask
  broadcast over the folded axis. Each query head still sees exactly its group's keys and mask, so
  the result is the same attention (heads are independent); nothing is copied.
* a decode step *without* a mask (every slot of the layer valid: its heads keep the same count,
  as under a per-layer profile, uniform or a full cache) went to cuDNN too, and there each step's
  key length is a new shape: a third GPU call measured generate on 2 whole 8k records at 27 s, 24 s
  of it in cuDNN's attention, against 0.65 s once the plans existed. Such steps take the same
  cuDNN-free path (``folded_decode_step``).

On the CPU the folded call is the faster one too, in half precision: SDPA's CPU kernel given one
bfloat16 query token per head and ``enable_gqa`` took 8.6 ms a layer for 16 rows of 532 slots (3 KV
heads of 9 query heads, one thread), the folded call 1.5 ms with the same output (a few elements of
~10^4 differ in the last bit); decode steps of the bundled model in bfloat16 ran 2-3x faster end to end
(``benchmarks/decode_step_speed.py``). In float32 the folded call gains nothing there and rounds
differently, so float32 on the CPU keeps SDPA's own call: its results stay bit-identical.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from evolalloc.runtime.banded import banded_attention

_KEEP_CUDNN = os.environ.get("EVOLALLOC_SDPA_CUDNN", "") == "1"


_HALF = (torch.bfloat16, torch.float16)


def folded_decode_step(query: torch.Tensor) -> bool:
    """One query token where the folded path is the faster call, with or without a mask: on CUDA
    (cuDNN-free), and on the CPU in half precision (module docstring)."""
    return query.shape[2] == 1 and (query.device.type == "cuda" or query.dtype in _HALF)


def masked_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None,
                     scaling: float, *, decode_path: bool | None = None, fold_chunk: bool = True,
                     band: bool = False) -> torch.Tensor:
    """Masked attention; returns ``[B, Hq, q, D]``.

    Shapes: query ``[B, Hq, q, D]``; key, value ``[B, Hkv, S, D]``; ``mask`` bool (True = visible),
    broadcastable to ``[B, Hkv, q, S]`` — per KV head (dim 1 of size ``Hkv`` or 1), not per query head;
    ``None`` (every key visible) only for a decode step (one query token).
    ``decode_path``: take the folded, cuDNN-free path for one query token; ``None`` = where it is the
    faster call (``folded_decode_step``: CUDA, or half precision on the CPU).
    ``fold_chunk``: several query tokens on the CPU fold too (``_folded_chunk``: tokens fed over an evicted
    cache); the prefill's chunks pass ``False`` and keep SDPA's own call, so records stay as they were.
    ``band``: the mask is a window (a sliding-window layer, a TensorRT-LLM window): on the CPU each call
    skips the key blocks it hides, with the same output to the bit (``runtime/banded.py``).
    """
    batch, q_heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    n_rep = q_heads // kv_heads
    if decode_path is None:
        decode_path = folded_decode_step(query)
    if q_len == 1 and decode_path:  # a decode step on the GPU, or in half precision on the CPU
        def attend(q, k, v, m):
            return _sdpa_without_cudnn(q, k, v, m, scaling)
        if n_rep == 1:
            return _banded_or_whole(attend, query, key, value, mask, band)
        folded = query.reshape(batch, kv_heads, n_rep, dim)  # query head h = group h // n_rep, as repeat_interleave
        out = _banded_or_whole(attend, folded, key, value, mask, band)  # mask [B, Hkv|1, 1, S] broadcasts over n_rep
        return out.reshape(batch, q_heads, 1, dim)
    if fold_chunk and q_len > 1 and n_rep > 1 and mask is not None and query.device.type != "cuda":
        return _folded_chunk(query, key, value, mask, scaling)
    # Several query tokens on a GPU (a prefill chunk, a question fed over the evicted cache), or float32 on
    # the CPU: SDPA's own choice.
    # There cuDNN won on the H200 (8k prefill 11760 tokens/s with it, 5937 without), its shapes recurring.
    mask = per_query_head(mask, n_rep)

    def attend(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=scaling, enable_gqa=n_rep > 1)
    return _banded_or_whole(attend, query, key, value, mask, band)


def _banded_or_whole(attend, query, key, value, mask, band: bool) -> torch.Tensor:
    """``attend`` over the key blocks the window leaves visible (CPU, ``runtime/banded.py``), else one call."""
    if band and mask is not None:
        out = banded_attention(attend, query, key, value, mask)
        if out is not None:
            return out
    return attend(query, key, value, mask)


def _folded_chunk(query, key, value, mask, scaling) -> torch.Tensor:
    """Several query tokens on the CPU (an answer fed over the evicted cache: the search's likelihood),
    each KV group's query heads folded into the query length, ``[B, Hkv, n_rep * q, D]`` (row
    ``r * q + i`` is query head ``r`` of the group at token ``i``) against the group's own keys, the mask's
    ``q`` rows repeated for each folded head. The same numbers as SDPA's grouped call (measured equal to
    the bit on 16 x 9 heads x 8 tokens, bfloat16 and float32) without repeating the mask to every query
    head, and 15-25 % faster there."""
    batch, q_heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    n_rep = q_heads // kv_heads
    mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
    mask = mask.expand(mask.shape[0], mask.shape[1], q_len, mask.shape[3]).repeat(1, 1, n_rep, 1)
    folded = query.reshape(batch, kv_heads, n_rep * q_len, dim)
    out = F.scaled_dot_product_attention(folded, key, value, attn_mask=mask, scale=scaling)
    return out.reshape(batch, q_heads, q_len, dim)


def per_query_head(mask: torch.Tensor | None, n_rep: int) -> torch.Tensor | None:
    """A per-KV-head mask ``[B, Hkv, q, S]`` repeated to ``[B, Hkv * n_rep, q, S]`` (query head ``h``
    reads KV head ``h // n_rep``); a mask shared by every head (dim 1 of size 1) is returned as it is."""
    if mask is not None and mask.dim() == 4 and mask.shape[1] > 1 and n_rep > 1:
        return mask.repeat_interleave(n_rep, dim=1)
    return mask


def _sdpa_without_cudnn(query, key, value, mask, scaling) -> torch.Tensor:
    if _KEEP_CUDNN or query.device.type != "cuda" or not torch.backends.cuda.cudnn_sdp_enabled():
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling)
    # Two flag flips, cheaper than the ``sdpa_kernel`` context manager on every layer of every step.
    # The flag is process-wide: a thread calling SDPA meanwhile may skip cuDNN too (still exact).
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling)
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)
