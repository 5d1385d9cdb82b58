"""Compression: keep the top-``b`` prefix of each (layer, KV head) ranking of a prefill record.

Per-layer budgets (all heads of a layer equal) shrink the layer's tensors for real. Per-head
budgets pad the layer to its largest head budget and mark the unused slots invalid; several
(record, budgets) rows batched together are padded to the largest row the same way.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from evolalloc.runtime.cache import EvictedCache
from evolalloc.runtime.prefill import PrefillRecord
from evolalloc.runtime.scorers import Scorer


def validate_budgets(budgets, num_layers: int, num_kv_heads: int, scorer: Scorer | None = None) -> np.ndarray:
    """Check and normalise budgets to an int64 array ``[num_layers, num_kv_heads]``.

    Accepts ``[num_layers]`` (one budget per layer, every head alike) or
    ``[num_layers, num_kv_heads]``. Raises ``ValueError`` saying what was expected.
    """
    array = np.asarray(budgets)
    expected = f"[{num_layers}] or [{num_layers}, {num_kv_heads}]"
    if array.dtype == object or array.ndim not in (1, 2):
        raise ValueError(f"budgets must be an array of shape {expected}; got shape {array.shape}")
    if array.ndim == 1:
        array = np.repeat(array[:, None], num_kv_heads, axis=1)
    if array.shape != (num_layers, num_kv_heads):
        raise ValueError(f"budgets must have shape {expected} (layers x KV heads); got {tuple(np.asarray(budgets).shape)}")
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise ValueError(f"budgets must be integers; got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.floating):
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise ValueError("budgets must be whole numbers of tokens; got non-integer values")
    array = array.astype(np.int64)
    if np.any(array < 0):
        raise ValueError(f"budgets must be >= 0; got {int(array.min())}")
    floor = max(1, scorer.always_kept if scorer is not None else 1)
    if np.any(array < floor):
        what = f"scorer {scorer.name!r} always keeps {scorer.always_kept} tokens (sinks + window)" if scorer else "each head needs at least one token"
        raise ValueError(f"budgets must be >= {floor}: {what}; got a budget of {int(array.min())}")
    return array


def _kept_slots(ranking: torch.Tensor, budgets: torch.Tensor, slots: int, length: int):
    """Positions kept per head, in position order, padded to ``slots``.

    ranking ``[Hkv, L]``; budgets ``[Hkv]`` (already clipped to L). Returns (positions
    ``[Hkv, slots]`` clamped to valid indices, valid ``[Hkv, slots]`` bool).
    """
    width = min(slots, length)
    top = ranking[:, :width]
    slot = torch.arange(slots, device=ranking.device)
    keep = slot[None, :] < budgets[:, None]  # [Hkv, slots]
    padded = torch.cat([top, torch.zeros(top.shape[0], slots - width, dtype=top.dtype, device=top.device)], dim=1)
    # Invalid slots get positions past the end so that sorting moves them last.
    positions = torch.where(keep, padded, length + slot[None, :])
    positions, _ = positions.sort(dim=-1)
    valid = positions < length
    return positions.clamp(max=length - 1), valid


def compress_batch(rows: Sequence[tuple[PrefillRecord, np.ndarray]], scorer: Scorer, room: int = 0) -> EvictedCache:
    """Build one evicted cache for several (record, budgets) rows.

    Each row keeps, in every (layer, head), the top-``b`` prefix of ``scorer``'s ranking
    (``b`` clipped to the record's length). An ``Adapted`` scorer first turns each row's budgets
    into that instance's (AdaKV, CAKE, global top-k: ``runtime.adaptive``). ``room``: tokens that will be appended later.
    """
    if not rows:
        raise ValueError("compress_batch needs at least one row")
    first = rows[0][0]
    num_layers, num_kv_heads = first.num_layers, first.keys[0].shape[0]
    clipped = []
    for record, budgets in rows:
        if scorer.key not in record.rankings:
            raise ValueError(f"record {record.uid!r} has no ranking for scorer {scorer.key!r}; it has {sorted(record.rankings)}")
        array = validate_budgets(budgets, num_layers, num_kv_heads, scorer)
        adapt = getattr(scorer, "adapt", None)  # an input-adaptive method (runtime.adaptive.Adapted)
        if adapt is not None:
            array = np.asarray(adapt(record, array), dtype=np.int64)
        clipped.append(np.minimum(array, record.length))
    keys, values, valid = [], [], []
    for layer in range(num_layers):
        slots = int(max(c[layer].max() for c in clipped))
        layer_keys, layer_values, layer_valid = [], [], []
        for (record, _), budget in zip(rows, clipped):
            ranking = record.rankings[scorer.key][layer]
            head_budget = torch.as_tensor(budget[layer], device=ranking.device)
            positions, ok = _kept_slots(ranking, head_budget, slots, record.length)
            index = positions[..., None].expand(-1, -1, record.keys[layer].shape[-1])
            layer_keys.append(record.keys[layer].gather(1, index).masked_fill(~ok[..., None], 0))
            layer_values.append(record.values[layer].gather(1, index).masked_fill(~ok[..., None], 0))
            layer_valid.append(ok)
        mask = torch.stack(layer_valid)
        keys.append(torch.stack(layer_keys))
        values.append(torch.stack(layer_values))
        valid.append(None if bool(mask.all()) else mask)
    return EvictedCache(keys, values, valid, room=room)


def compress(record: PrefillRecord, budgets, scorer: Scorer, room: int = 0) -> EvictedCache:
    """One record under one allocation: ``budgets`` is ``[num_layers]`` or ``[num_layers, num_kv_heads]``."""
    return compress_batch([(record, budgets)], scorer, room=room)
