"""Attention over only the key blocks a mask leaves visible: sliding-window layers on the CPU.

Gemma 3 gives 15 of its 18 layers a window of 512 keys, Mistral and Qwen with ``use_sliding_window``
do the same, yet the window reaches SDPA as a mask over every key of the prompt: the CPU kernel
computes each query against all ``S`` keys and masks afterwards. A prefill chunk of 512 queries at
the end of an 8192-token Gemma prompt computed 16 key blocks of which 2 are visible.

PyTorch's CPU flash-attention kernel walks the keys in blocks of ``KV_BLOCK`` (512, aten's
``kv_split_size``) with an online softmax. A block whose keys are all masked for a row adds exactly
zero to the row's sum and rescales its accumulator by exactly one, so a key slice that begins and
ends on the kernel's block boundaries and drops only wholly masked blocks gives the same output,
to the bit (measured in float32 and bfloat16; ``tests/runtime/test_banded_attention.py`` checks it on
every machine the suite runs on). Queries go in blocks of ``QUERY_BLOCK`` rows, each with its own
slice. On a GPU nothing is sliced: its kernels block differently, and this was not measured there.
"""

from __future__ import annotations

from typing import Callable

import torch

#: The CPU kernel's key block (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp, ``kv_split_size``).
KV_BLOCK = 512
#: Query rows sharing one key slice: a whole prefill chunk (chunked.DEFAULT_CHUNK_SIZE).
QUERY_BLOCK = 512

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def visible_span(rows_mask: torch.Tensor) -> tuple[int, int] | None:
    """``(lo, hi)``: the smallest key slice on ``KV_BLOCK`` boundaries (``hi`` may be the key count)
    holding every key any of these rows sees. ``rows_mask`` bool ``[B|1, H|1, r|1, S]``. ``None`` when
    no key is visible: such rows keep the full call (whatever SDPA makes of an empty row)."""
    length = rows_mask.shape[-1]
    seen = rows_mask.reshape(-1, length).any(dim=0).nonzero()
    if seen.numel() == 0:
        return None
    first, last = int(seen[0]), int(seen[-1])
    lo = first // KV_BLOCK * KV_BLOCK
    hi = min(length, -(-(last + 1) // KV_BLOCK) * KV_BLOCK)
    return lo, hi


def banded_attention(attend: Attend, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     mask: torch.Tensor) -> torch.Tensor | None:
    """``attend(q, k, v, m)`` (one SDPA call) on each query block against its visible key blocks only.

    query ``[B, Hq, q, D]``; key, value ``[B, Hkv, S, D]``; mask bool ``[B|1, H|1, q|1, S]`` (True =
    visible; a mask of one row is every query's). Returns ``[B, Hq, q, D]``, or ``None`` when the call
    runs on a GPU, or no query block would drop a key block (then the caller's one call is the same).
    """
    if query.device.type != "cpu" or mask.dim() != 4 or key.shape[2] <= KV_BLOCK:
        return None
    q_len, length = query.shape[2], key.shape[2]
    per_row = mask.shape[2] > 1
    starts = range(0, q_len, QUERY_BLOCK) if per_row else [0]
    spans = []
    for start in starts:
        stop = min(start + QUERY_BLOCK, q_len) if per_row else q_len
        span = visible_span(mask[:, :, start:stop] if per_row else mask)
        spans.append((start, stop, span if span is not None else (0, length)))
    if all(lo == 0 and hi == length for _, _, (lo, hi) in spans):
        return None
    outs = []
    for start, stop, (lo, hi) in spans:
        rows = mask[:, :, start:stop, lo:hi] if per_row else mask[..., lo:hi]
        outs.append(attend(query[:, :, start:stop], key[:, :, lo:hi], value[:, :, lo:hi], rows))
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)
