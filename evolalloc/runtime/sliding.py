"""Model sliding windows and logit soft-capping, as the stock models define them.

A sliding-window layer of window ``W`` (Mistral, Phi-3, Gemma 2/3, Qwen2/3 with ``use_sliding_window``)
lets a query at position ``p`` see keys at positions ``p - W < j <= p`` (transformers'
``sliding_window_overlay``). After eviction a slot's index is no longer its position, so the mask
is built from *original* positions: the query positions are the ``position_ids`` the model passes,
the key positions are the cache's (``EvictedCache.positions``, kept at compression and extended
here with each new token's position).

So a sliding layer can use at most ``W - 1`` prompt tokens at the first answer token (the query
itself is the ``W``-th): ``window_cap(W) = W - 1`` is the most a budget can usefully give it.
"""

from __future__ import annotations

import torch

from evolalloc.core.geometry import window_cap


def query_positions(kwargs: dict, q_len: int, k_len: int, device: torch.device) -> torch.Tensor:
    """``[B or 1, q]`` positions of this call's queries: the model's ``position_ids``, else the last
    ``q_len`` of ``k_len`` contiguous positions (a prefill)."""
    positions = kwargs.get("position_ids")
    if positions is None:
        return torch.arange(k_len - q_len, k_len, device=device)[None]
    return positions.to(device).reshape(-1, q_len)


def contiguous_key_positions(query_pos: torch.Tensor, k_len: int) -> torch.Tensor:
    """``[B, 1, S]`` key positions of a cache without eviction: the ``k_len`` positions ending at
    each row's last query (a full cache, or transformers' sliding cache trimmed to its window)."""
    offsets = torch.arange(k_len, device=query_pos.device) - (k_len - 1)
    return (query_pos[:, -1:] + offsets[None, :])[:, None, :]


def evicted_key_positions(cache, layer: int, query_pos: torch.Tensor) -> torch.Tensor:
    """``[B, Hkv, S]`` original positions of an evicted cache's slots in ``layer``.

    The attention module has just appended this call's ``q`` new tokens (``cache.update``); their
    positions are appended here from ``query_pos`` ``[B, q]`` (the model's position_ids).
    """
    known = cache.positions[layer]
    used = cache.used[layer]
    if known.shape[-1] < used:
        fresh = query_pos[:, None, -(used - known.shape[-1]):].expand(known.shape[0], known.shape[1], -1)
        known = torch.cat([known, fresh.to(known.device)], dim=-1)
        cache.positions[layer] = known
    return known


def sliding_window_mask(query_pos: torch.Tensor, key_pos: torch.Tensor, window: int) -> torch.Tensor:
    """``[B, H, q, S]`` bool: key at ``key_pos`` (``[B, H, S]``) within the window of the query at
    ``query_pos`` (``[B, q]``): ``p - W < j``. Causality is the caller's (new tokens come last)."""
    return key_pos[:, :, None, :] > (query_pos[:, None, :, None] - int(window))


def softcapped_attention(query, key, value, mask: torch.Tensor | None, scaling: float, softcap: float) -> torch.Tensor:
    """Attention with logits ``softcap * tanh(logits / softcap)`` (Gemma 2), as transformers' eager path.

    query ``[B, Hq, q, D]``; key/value ``[B, Hkv, S, D]``; mask bool broadcastable to ``[B, Hq, q, S]``
    (True = visible) or None. Returns ``[B, Hq, q, D]``. Masked logits get the dtype's minimum
    (not -inf), as transformers adds it: a row with nothing visible stays finite.
    """
    n_rep = query.shape[1] // key.shape[1]
    keys = key.repeat_interleave(n_rep, dim=1) if n_rep > 1 else key
    values = value.repeat_interleave(n_rep, dim=1) if n_rep > 1 else value
    logits = torch.matmul(query, keys.transpose(2, 3)) * scaling
    logits = torch.tanh(logits / softcap) * softcap
    if mask is not None:
        logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
    weights = torch.softmax(logits, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, values)


def reachable_first(ranking: torch.Tensor, scores: torch.Tensor, length: int, window: int | None):
    """Move the prompt tokens a sliding layer can never attend to again to the end of its ranking.

    ranking ``[Hkv, L]`` positions, scores ``[Hkv, L]`` in ranking order. After a prompt of
    ``length`` tokens, a layer of window ``W`` sees only positions ``>= length - (W - 1)``; the
    others keep their relative order behind every reachable one and score ``-inf``, so no budget
    (nor an input-adaptive split across heads) is spent on them. Identity for a full layer or a
    prompt within the window.
    """
    cap = window_cap(window)
    if cap is None or length <= cap:
        return ranking, scores
    reachable = ranking >= length - cap  # [Hkv, L]
    order = torch.argsort((~reachable).to(torch.int8), dim=-1, stable=True)
    ranking = torch.gather(ranking, -1, order)
    scores = torch.gather(scores, -1, order).masked_fill(~torch.gather(reachable, -1, order), float("-inf"))
    return ranking, scores
