"""The prefill forward, one shot or in chunks: memory linear in the prompt length.

A one-shot forward over ``L`` tokens holds every layer's activations for ``L`` tokens at once
(the MLP's ``[L, intermediate]`` dominates), and an attention given an explicit mask (the
windowed prefill's) materialises an ``[L, L]`` mask. Fed in chunks of ``C`` tokens through a
cache, the activations are ``O(C)`` and an attention mask ``O(C x L)``; the capture
(``runtime/capture.py``) takes each chunk's queries against every key so far, so what it records
is the same as in one shot. Each chunk gets its *original* positions (RoPE), so the keys are the
same up to float rounding (the attention kernels sum in another order).

Prompts up to ``ONE_SHOT_TOKENS`` take the one-shot path unchanged: their records are
bit-identical to what they were before chunking existed.
"""

from __future__ import annotations

import torch

from evolalloc.runtime.cache import EvictedCache
from evolalloc.runtime.support import text_config

#: Prompts up to this many tokens take one forward: the README's ~1k-token jobs keep the records
#: they had before chunking existed (bit-identical).
ONE_SHOT_TOKENS = 2048
#: Tokens per forward for a longer prompt. Measured on one 8192-token prefill of the 135M model
#: (SnapKV, 1 thread): peak RSS 1420 MB in chunks of 512, 1816 MB in chunks of 2048 (each chunk's
#: [2048, 8192] attention mask and activations), 1616 MB in one shot.
DEFAULT_CHUNK_SIZE = 512


class _PrefillCache(EvictedCache):
    """An ``EvictedCache`` whose buffers of ``length`` slots per layer are allocated at the
    layer's first ``update`` (its heads, head size and dtype come from the model), so chunks are
    written in place: no concatenation, no copy of the keys so far per chunk."""

    def __init__(self, num_layers: int, length: int):
        self.length = length
        self.keys = [None] * num_layers
        self.values = [None] * num_layers
        self.valid = [None] * num_layers  # every slot is a real prompt token
        self.used = [0] * num_layers
        self._pending_valid = None
        self.positions = None  # slot = position in a prefill
        self.windows = None

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        if self.keys[layer_idx] is None:
            b, h, _, d = key_states.shape
            self.keys[layer_idx] = key_states.new_empty(b, h, self.length, d)
            self.values[layer_idx] = value_states.new_empty(b, h, self.length, d)
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)


def check_chunk_size(chunk_size: int | None) -> int | None:
    if chunk_size is None:
        return None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"prefill chunk_size must be a positive integer, got {chunk_size!r}")
    return chunk_size


@torch.no_grad()
def prefill_forward(model, ids: torch.Tensor, capture, *, chunk_size: int | None = None, windows=None) -> torch.Tensor:
    """Run ``ids`` ``[1, L]`` through ``model`` with ``capture`` recording; return the logits
    ``[V]`` after the last token.

    ``chunk_size``: tokens per forward; ``L <= chunk_size`` is one forward without a cache.
    ``None``: one forward up to ``ONE_SHOT_TOKENS``, chunks of ``DEFAULT_CHUNK_SIZE`` beyond.
    ``windows``: per-layer sliding windows (the windowed prefill, ``runtime/windowed.py``).
    ``capture.length`` is set to ``L`` for the chunked path.
    """
    one_shot = check_chunk_size(chunk_size)
    if chunk_size is None:
        one_shot, chunk_size = ONE_SHOT_TOKENS, DEFAULT_CHUNK_SIZE
    length = ids.shape[1]
    positions = torch.arange(length, device=ids.device)[None, :]
    extra = {} if windows is None else {"evolalloc_windows": windows}
    if length <= one_shot:
        out = model(input_ids=ids, position_ids=positions, use_cache=False, logits_to_keep=1, evolalloc_capture=capture,
                    **extra)
        return out.logits[0, -1]
    capture.length = length
    cache = _PrefillCache(text_config(model.config).num_hidden_layers, length)
    for start in range(0, length, chunk_size):
        stop = min(start + chunk_size, length)
        # Only the last chunk's logits are wanted; 1 keeps the others' to one row.
        out = model(input_ids=ids[:, start:stop], position_ids=positions[:, start:stop], past_key_values=cache,
                    use_cache=True, logits_to_keep=1, evolalloc_capture=capture, **extra)
    return out.logits[0, -1]
