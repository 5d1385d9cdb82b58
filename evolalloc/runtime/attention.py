"""evolalloc's attention function, registered with transformers' ``AttentionInterface``.

One function serves three situations:

* plain use (no evolalloc kwargs): ordinary causal attention, so a model switched to it still
  behaves like the stock model;
* prefill capture (kwarg ``evolalloc_capture``): ordinary causal attention, and on the side the
  layer's keys/values and the attention statistics the scorers asked for (SnapKV's window scores
  are computed here, for the last ``w`` queries only — no ``output_attentions``, which would
  materialise every layer's full attention matrix);
* decoding on an evicted cache (kwarg ``evolalloc_cache``): layers hold different numbers of
  slots, and per-head budgets pad a layer to its largest head, so the mask is built here, per
  layer: a slot is visible if it is valid (``cache.valid[layer]``) and not in the future of the
  query. The new tokens always sit at the end of a layer's slots, so "not in the future" is the
  causal mask aligned to the end of that layer's keys.

transformers gives a custom attention function no mask unless a mask function is registered too;
we register none on purpose and build the mask here.

A fourth, for profiles meant for TensorRT-LLM (``runtime/windowed.py``): per-layer sliding-window
attention, in the prefill (kwarg ``evolalloc_windows``: one window per layer) and while decoding
(``cache.windows``). A query sees the last ``W`` valid tokens up to and including itself, as a
cyclic KV cache of ``W`` slots does.

A fifth, for training gates on the answer (``runtime/soft_keep.py``): tokens fed over a prompt's
cache with ``log r`` added to the attention logits of the prompt's keys (kwarg
``evolalloc_keep_bias``: ``[layers, B, Hkv, n]``).

Decoding on a cache that holds its budgets (``cache.held``, ``runtime/decode_eviction.py``): the
same as decoding on an evicted cache, and afterwards the layer's queries are handed to the held
state, which records what its scorer ranks by (``runtime/online_capture.py``); only then.

The model's own sliding windows (Mistral, Phi-3, Gemma 2/3) and Gemma 2's logit soft-capping
are applied as the stock model applies them (``runtime/sliding.py``); which models the function
serves exactly is decided in ``runtime/support.py``.
"""

from __future__ import annotations

import contextlib
import contextvars

import torch
import torch.nn.functional as F

from evolalloc.runtime.masked_sdpa import folded_decode_step, masked_attention, per_query_head
from evolalloc.runtime.sliding import (
    contiguous_key_positions,
    evicted_key_positions,
    query_positions,
    sliding_window_mask,
    softcapped_attention,
)
from evolalloc.runtime.support import UnsupportedAttention, check_attention_arguments, note_attention_call

ATTENTION_NAME = "evolalloc"
# The evicted cache for calls that cannot pass the ``evolalloc_cache`` kwarg: transformers'
# ``generate()`` refuses model kwargs it does not know (see ``runtime/hf_generate.py``).
_ACTIVE_CACHE: contextvars.ContextVar = contextvars.ContextVar("evolalloc_active_cache", default=None)


@contextlib.contextmanager
def active_cache(cache):
    """Within this block, attention without an ``evolalloc_cache`` kwarg uses ``cache``."""
    token = _ACTIVE_CACHE.set(cache)
    try:
        yield cache
    finally:
        _ACTIVE_CACHE.reset(token)


def causal_mask(q_len: int, k_len: int, device: torch.device) -> torch.Tensor:
    """``[q_len, k_len]`` bool: query ``i`` sees key ``j`` iff ``j <= k_len - q_len + i``."""
    offset = k_len - q_len
    rows = torch.arange(q_len, device=device)[:, None]
    cols = torch.arange(k_len, device=device)[None, :]
    return cols <= rows + offset


def evolalloc_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Attention for one layer.

    Shapes: query ``[B, Hq, q, D]``; key, value ``[B, Hkv, S, D]`` (the layer's whole cache,
    new tokens last). Returns ``([B, q, Hq, D], None)`` as transformers expects. ``sliding_window``
    and ``softcap`` are the stock model's (``runtime/sliding.py``); any other argument the model
    passes with a value refuses the call (``runtime/support.py``): never silently something else.
    """
    check_attention_arguments(kwargs)
    note_attention_call(module.layer_idx)
    sliding, softcap = kwargs.get("sliding_window"), kwargs.get("softcap")
    q_len, k_len = query.shape[2], key.shape[2]
    n_rep = query.shape[1] // key.shape[1]
    cache = kwargs.get("evolalloc_cache")
    if cache is None and "evolalloc_capture" not in kwargs:
        cache = _ACTIVE_CACHE.get()
    keep_bias = kwargs.get("evolalloc_keep_bias")
    if keep_bias is not None:  # soft eviction (runtime.soft_keep): differentiable in the bias
        if sliding or softcap:
            raise UnsupportedAttention("soft eviction (training gates on the answer) is not implemented for "
                                       "sliding-window or soft-capped attention")
        from evolalloc.runtime.soft_keep import keep_bias_attention

        out = keep_bias_attention(query, key, value, scaling, keep_bias[module.layer_idx])
        return out.transpose(1, 2).contiguous(), None

    mask = _visibility(module.layer_idx, query, key, cache, kwargs, sliding)
    visible = mask  # per KV head, before the soft-capped path spreads it over the query heads
    if softcap:
        if mask is None and q_len > 1:
            mask = causal_mask(q_len, k_len, query.device)
        if mask is not None:
            mask = per_query_head(mask, n_rep)
        out = softcapped_attention(query, key, value, mask, scaling, softcap)
    elif mask is None and not folded_decode_step(query):
        # Full prefill (or plain use): let SDPA pick its fused causal kernel.
        out = F.scaled_dot_product_attention(query, key, value, is_causal=q_len > 1, scale=scaling,
                                             enable_gqa=n_rep > 1)
    else:
        # The mask per KV head, GQA folded for one query; a decode step without a mask comes here too on a
        # GPU (SDPA's own choice, cuDNN, builds a plan for every new key length) and in half precision on
        # the CPU (SDPA's CPU kernel is 6x slower there for one query token): masked_sdpa.py.
        # Tokens fed over an evicted cache fold onto their KV groups on the CPU; a prefill's chunks (capturing)
        # keep SDPA's own call, so a record is what it always was.
        # A window (the model's own, or a profile's for TensorRT-LLM) hides most keys of a long prompt: on the
        # CPU the call skips the key blocks it hides, to the bit the same (runtime/banded.py).
        windowed = sliding is not None or kwargs.get("evolalloc_windows") is not None \
            or getattr(cache, "windows", None) is not None
        out = masked_attention(query, key, value, mask, scaling, fold_chunk="evolalloc_capture" not in kwargs,
                               band=windowed)

    held = getattr(cache, "held", None)
    if held is not None:  # decode-time eviction observes what its scorer ranks by (runtime/online_capture.py)
        held.observe(cache, module.layer_idx, query, key, visible, scaling, sliding, softcap,
                     query_positions(kwargs, q_len, k_len, query.device))
    capture = kwargs.get("evolalloc_capture")
    if capture is not None:
        capture.record(module.layer_idx, query, key, value, scaling, window=sliding, softcap=softcap)
    return out.transpose(1, 2).contiguous(), None


def _visibility(layer: int, query, key, cache, kwargs, sliding: int | None) -> torch.Tensor | None:
    """Bool mask broadcastable to ``[B, Hkv, q, S]`` (True = visible; per KV head, the callers
    spread it over the query heads), or ``None`` for plain causal
    attention with ``q == S`` (a full prefill) or one query seeing every slot.

    Combines: the evicted cache's valid slots; causality aligned to the end of the layer's keys
    (new tokens come last); a profile's TensorRT-LLM windows (``runtime/windowed.py``); and the
    model's own sliding window, by original position (``runtime/sliding.py``).
    """
    q_len, k_len, device = query.shape[2], key.shape[2], query.device
    valid = cache.valid[layer] if cache is not None else None
    mask = _window_mask(layer, q_len, key, cache, kwargs.get("evolalloc_windows"))  # [B, Hkv or 1, q, S]
    if mask is None and valid is not None:
        mask = valid[:, :, None, :]  # [B, Hkv, 1, S]
    if sliding is not None and k_len > 1:
        query_pos = query_positions(kwargs, q_len, k_len, device)
        if cache is not None and getattr(cache, "positions", None) is not None:
            key_pos = evicted_key_positions(cache, layer, query_pos)
        elif cache is not None:
            raise UnsupportedAttention("this evicted cache does not track token positions, which a sliding-window "
                                       "layer needs (build it with runtime.compress)")
        else:
            key_pos = contiguous_key_positions(query_pos, k_len)
        window = sliding_window_mask(query_pos, key_pos, sliding)  # [B, Hkv or 1, q, S]
        mask = window if mask is None else mask & window
    if mask is None and q_len == k_len:
        return None
    if q_len > 1:
        causal = causal_mask(q_len, k_len, device)
        mask = causal if mask is None else mask & causal
    return mask


def _window_mask(layer: int, q_len: int, key: torch.Tensor, cache, prefill_windows) -> torch.Tensor | None:
    """``[B, Hkv or 1, q, S]`` bool sliding-window mask, or ``None`` when no window applies.

    Prefill (``prefill_windows[layer] = W``): query ``i`` sees keys ``i - W < j <= i``. Decoding on
    a cache with ``cache.windows[layer]`` (``[B]``): with ``c`` the running count of valid slots,
    the query in slot ``t`` sees valid slot ``s <= t`` iff ``c[t] - c[s] < W`` (itself plus the
    ``W - 1`` valid tokens before it), so padding and evicted slots never use up the window.
    """
    k_len, device = key.shape[2], key.device
    if cache is None:
        if prefill_windows is None:
            return None
        window = int(prefill_windows[layer])
        rows = torch.arange(q_len, device=device)[:, None] + (k_len - q_len)
        cols = torch.arange(k_len, device=device)[None, :]
        return ((cols <= rows) & (rows - cols < window))[None, None]
    windows = getattr(cache, "windows", None)
    if windows is None or windows[layer] is None:
        return None
    b, h = key.shape[:2]
    valid = cache.valid[layer]
    if valid is None:
        valid = torch.ones(b, h, k_len, dtype=torch.bool, device=device)
    count = valid.long().cumsum(dim=-1)  # [B, Hkv, S]
    at_query = count[..., k_len - q_len :]  # [B, Hkv, q]
    within = (at_query[..., :, None] - count[..., None, :]) < windows[layer].to(device)[:, None, None, None]
    causal = causal_mask(q_len, k_len, device)
    return valid[..., None, :] & within & causal


def register_attention() -> None:
    """Register ``evolalloc`` with transformers (idempotent)."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION_NAME, evolalloc_attention)


def use_evolalloc_attention(model) -> None:
    """Switch a loaded model to evolalloc's attention function (an explicit call, not an import side effect)."""
    register_attention()
    model.set_attn_implementation(ATTENTION_NAME)
