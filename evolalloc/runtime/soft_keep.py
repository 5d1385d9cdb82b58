"""Soft eviction: tokens fed over a prompt's cache whose keys are each kept with a probability ``r``.

What the answer-trained gates (``learned.answer_train``) differentiate through. A hard eviction
removes key ``i`` from every query's softmax; a soft one multiplies its attention weight by
``r_i`` before the softmax normalises, i.e. adds ``log r_i`` to its attention logit:

    A(j, i) = exp(q_j . k_i * scale + log r_i) / sum_i' exp(q_j . k_i' * scale + log r_i')

so ``r = 1`` is the model's own attention (bit for bit: the bias is an exact 0) and ``r -> 0``
is the token dropped (its weight -> 0, the others renormalised as over a cache without it). The
bias is per (layer, KV head, prompt token) and shared by the KV group's query heads, as a
per-KV-head eviction is; tokens fed after the prompt (the answer) see each other causally and
unbiased.

The bias reaches the attention function as the model kwarg ``evolalloc_keep_bias`` (a
``[layers, B, Hkv, n]`` tensor, or a list of ``[B, Hkv, n]``), read by ``runtime.attention`` per
``layer_idx``; the model and its cache stay the real transformers objects (a ``DynamicCache``
filled with the prompt's keys and values).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def keep_bias_attention(query, key, value, scaling: float, bias: torch.Tensor) -> torch.Tensor:
    """Attention with ``bias`` ``[B, Hkv, n]`` (``log r``) added to the logits of the first ``n`` keys.

    query ``[B, Hq, q, D]``; key, value ``[B, Hkv, S, D]`` (``S >= n``, the ``S - n`` keys after the
    prompt are the fed tokens, last). Returns ``[B, Hq, q, D]``.
    """
    q_len, k_len = query.shape[2], key.shape[2]
    n_rep = query.shape[1] // key.shape[1]
    n = bias.shape[-1]
    per_query_head = bias.to(query.dtype).repeat_interleave(n_rep, dim=1)  # [B, Hq, n]
    after = per_query_head.new_zeros(*per_query_head.shape[:2], k_len - n)
    mask = torch.cat([per_query_head, after], dim=-1)[:, :, None, :]  # [B, Hq, 1, S]
    # The fed tokens see each other causally (query i sees key j <= n_before + i); built here, not
    # imported from runtime.attention, which imports this module.
    blocked = torch.ones(q_len, k_len, dtype=torch.bool, device=query.device).tril(k_len - q_len).logical_not()
    mask = mask.masked_fill(blocked, float("-inf"))
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling, enable_gqa=n_rep > 1)


def prompt_cache(keys: torch.Tensor, values: torch.Tensor):
    """A transformers ``DynamicCache`` holding a prompt's keys and values ``[layers, Hkv, n, D]``
    (after RoPE, as cached) for a batch of one."""
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer in range(keys.shape[0]):
        cache.update(keys[layer][None], values[layer][None], layer)
    return cache


def fed_logits(model, keys: torch.Tensor, values: torch.Tensor, ids: torch.Tensor, log_keep: torch.Tensor | None,
               start: int | None = None) -> torch.Tensor:
    """Logits ``[m, V]`` of ``ids`` ``[m]`` fed after a prompt whose cache is ``keys``, ``values``
    ``[layers, Hkv, n, D]``, each prompt key kept softly with ``log_keep`` ``[layers, Hkv, n]``
    (``None``: the model's own attention). Positions continue from ``start`` (default ``n``; the
    prompt's original length when the cache already lost tokens). Differentiable in ``log_keep``
    (the caller decides what else needs gradients)."""
    n = keys.shape[2] if start is None else start
    positions = torch.arange(n, n + ids.numel(), device=ids.device)[None]
    extra = {} if log_keep is None else {"evolalloc_keep_bias": log_keep[:, None]}
    out = model(input_ids=ids[None], position_ids=positions, past_key_values=prompt_cache(keys, values),
                use_cache=True, **extra)
    return out.logits[0]
