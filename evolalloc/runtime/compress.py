"""Compression: keep the top-``b`` prefix of each (layer, KV head) ranking of a prefill record.

Per-layer budgets (all heads of a layer equal) shrink the layer's tensors for real. Per-head
budgets pad the layer to its largest head budget and mark the unused slots invalid; several
(record, budgets) rows batched together are padded to the largest row the same way.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from evolalloc.runtime.bounded import check_within_bound
from evolalloc.runtime.cache import EvictedCache
from evolalloc.runtime.prefill import PrefillRecord
from evolalloc.runtime.scorers import Scorer
from evolalloc.runtime.spill import release


def validate_budgets(budgets, num_layers: int, num_kv_heads: int, scorer: Scorer | None = None,
                     reach: np.ndarray | None = None) -> np.ndarray:
    """Check and normalise budgets to an int64 array ``[num_layers, num_kv_heads]``.

    Accepts ``[num_layers]`` (one budget per layer, every head alike) or
    ``[num_layers, num_kv_heads]``. Raises ``ValueError`` saying what was expected.
    ``reach``: ``[num_layers]`` the most tokens each layer can use (a sliding layer's ``W - 1``);
    where it is below the scorer's always-kept tokens, it is that layer's floor instead.
    """
    array = np.asarray(budgets)
    expected = f"[{num_layers}] or [{num_layers}, {num_kv_heads}]"
    if array.dtype == object or array.ndim not in (1, 2):
        raise ValueError(f"budgets must be an array of shape {expected}; got shape {array.shape}")
    if array.ndim == 1:
        array = np.repeat(array[:, None], num_kv_heads, axis=1)
    if array.shape != (num_layers, num_kv_heads):
        raise ValueError(f"budgets must have shape {expected} (layers x KV "
                         f"heads); got {tuple(np.asarray(budgets).shape)}")
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise ValueError(f"budgets must be integers; got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.floating):
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise ValueError("budgets must be whole numbers of tokens; got non-integer values")
    array = array.astype(np.int64)
    if np.any(array < 0):
        raise ValueError(f"budgets must be >= 0; got {int(array.min())}")
    floor = scorer.min_budget if scorer is not None else 1
    if reach is not None:
        floor = np.minimum(floor, np.asarray(reach, dtype=np.int64))[:, None]
    if np.any(array < floor):
        what = (
            f"scorer {scorer.name!r} always keeps {scorer.always_kept} tokens (sinks + window)"
            if scorer
            else "each head needs at least one token"
        )
        raise ValueError(f"budgets must be >= {int(np.max(floor))}: {what}; got a budget of {int(array.min())}")
    return array


def _kept_slots(ranking: torch.Tensor, budgets: torch.Tensor, slots: int, length: int):
    """Stored slots kept per head, in position order, padded to ``slots``.

    ranking ``[..., R]`` (any leading dims, e.g. layers x heads) of slot indices into a store of
    ``length`` slots (a full record: slot = position, R = L; a bounded one: R = b_max and its
    slots are in position order too); budgets ``[...]`` (already clipped to R). Returns (slots
    ``[..., slots]`` clamped to valid indices, valid ``[..., slots]`` bool). Valid slots come
    first, so a prefix of ``n >= budget`` slots holds every kept one.
    """
    width = min(slots, ranking.shape[-1])
    top = ranking[..., :width]
    slot = torch.arange(slots, device=ranking.device)
    keep = slot < budgets[..., None]  # [..., slots]
    padded = torch.cat([top, top.new_zeros(*top.shape[:-1], slots - width)], dim=-1)
    # Invalid slots get positions past the end so that sorting moves them last.
    positions = torch.where(keep, padded, length + slot)
    positions, _ = positions.sort(dim=-1)
    valid = positions < length
    return positions.clamp(max=length - 1), valid


def row_budgets(record: PrefillRecord, budgets, scorer: Scorer) -> np.ndarray:
    """int64 ``[num_layers, num_kv_heads]``: ``budgets`` checked for ``record`` and, for an ``Adapted``
    scorer, turned into that instance's (AdaKV, CAKE, global top-k: ``runtime.adaptive``); not yet
    clipped to the prompt (decode-time eviction holds these while the sequence grows)."""
    num_kv_heads = record.kv_shapes()[0][0]  # shapes only: a spilled record stays unmapped
    array = validate_budgets(budgets, record.num_layers, num_kv_heads, scorer, reach=record.layer_reach())
    check_within_bound(record, array)
    adapt = getattr(scorer, "adapt", None)  # an input-adaptive method (runtime.adaptive.Adapted)
    if adapt is not None:
        # A bounded record's scores stop at b_max, so an adapter gives no head more (its cap).
        array = np.asarray(adapt(record, array), dtype=np.int64)
        check_within_bound(record, array)
    return array


def compress_batch(rows: Sequence[tuple[PrefillRecord, np.ndarray]], scorer: Scorer, room: int = 0, *,
                   track_positions: bool = False) -> EvictedCache:
    """Build one evicted cache for several (record, budgets) rows.

    Each row keeps, in every (layer, head), the top-``b`` prefix of ``scorer``'s ranking
    (``b`` clipped to the record's length). An ``Adapted`` scorer first turns each row's budgets
    into that instance's (AdaKV, CAKE, global top-k: ``runtime.adaptive``). ``room``: tokens that
    will be appended later. ``track_positions``: the cache keeps its slots' original positions even
    for a model without sliding layers (decode-time eviction ranks by them).
    The kept positions of a row are found for all layers at once; per (row, layer) there is
    one indexing op for the keys and one for the values (the search calls this for every
    candidate, so its Python loop is kept short).
    """
    if not rows:
        raise ValueError("compress_batch needs at least one row")
    first = rows[0][0]
    num_layers, num_kv_heads = first.num_layers, first.kv_shapes()[0][0]  # shapes only: a spilled record stays unmapped
    clipped = []
    for record, budgets in rows:
        if scorer.key not in record.rankings:
            raise ValueError(f"record {record.uid!r} has no ranking for scorer "
                             f"{scorer.key!r}; it has {sorted(record.rankings)}")
        # No (layer, head) keeps more than the prompt, nor more than a sliding layer can reach.
        clipped.append(np.minimum(row_budgets(record, budgets, scorer), record.layer_reach()[:, None]))
    slots = np.stack(clipped).max(axis=(0, 2))  # [num_layers]: each layer's largest kept set
    widest = int(slots.max())
    # Original positions of the kept slots, only for a model with sliding layers (runtime/sliding.py
    # masks by them); a full-attention model's search pays nothing for them.
    track = track_positions or any(record.reach is not None for record, _ in rows)
    kept = []  # per row: (slots, valid, original positions or None), each [num_layers, Hkv, widest]
    for (record, _), budget in zip(rows, clipped):
        ranking = record.rankings[scorer.key]
        slots_kept, ok = _kept_slots(ranking, torch.as_tensor(budget, device=ranking.device), widest, record.slots)
        kept.append((slots_kept, ok, record.positions_of(slots_kept) if track else None))
    # The cache lives where the model computes (first_logits' device), in its dtype; a record's
    # K/V may be stored elsewhere (pinned host memory, a spilled file) or narrower (record_dtype).
    device = first.first_logits.device
    dtype = first.compute_dtype or _stored_dtype(first.keys)
    # Buffers with room for what decoding appends, filled row by row (no second copy): all of a
    # row's layers are gathered, then a spilled row is unmapped before the next one is read, so
    # a batch maps one spilled record at a time, not all of them (issue 22: peak memory).
    keys = [torch.empty(len(rows), num_kv_heads, int(slots[layer]) + room, dim, dtype=dtype, device=device)
            for layer, dim in enumerate(_head_dims(first.keys))]
    values = [torch.empty(len(rows), num_kv_heads, int(slots[layer]) + room, dim, dtype=dtype, device=device)
              for layer, dim in enumerate(_head_dims(first.values))]
    for row, ((record, _), (positions, _, _)) in enumerate(zip(rows, kept)):
        for layer in range(num_layers):
            n = int(slots[layer])
            stored_keys, stored_values = record.keys[layer], record.values[layer]  # [Hkv, S_layer, D]
            # Padding slots may point past a bounded layer's store (layers hold different counts).
            pick = positions[layer, :, :n].clamp(max=stored_keys.shape[1] - 1).to(stored_keys.device)
            keys[layer][row, :, :n] = _gather(stored_keys, pick)
            values[layer][row, :, :n] = _gather(stored_values, pick)
        release(record)  # a no-op for a record held in memory; a spilled one is mapped again on its next use
    valid, original = [], []
    for layer in range(num_layers):
        n = int(slots[layer])
        if track:
            original.append(torch.stack([pos[layer, :, :n] for _, _, pos in kept]).to(device))  # [B, Hkv, n]
        mask = torch.stack([ok[layer, :, :n] for _, ok, _ in kept])  # [B, Hkv, n]
        if bool(mask.all()):
            mask = None
        else:
            # Padding slots repeat a real token; zero them so nothing can depend on them
            # (a multiply: ~10x faster than masked_fill here, and keys/values are finite).
            keys[layer][:, :, :n].mul_(mask[..., None])
            values[layer][:, :, :n].mul_(mask[..., None])
        valid.append(mask)
    return EvictedCache.adopt(keys, values, valid, used=[int(n) for n in slots], positions=original if track else None)


def _gather(stored: torch.Tensor, pick: torch.Tensor) -> torch.Tensor:
    """``stored[h, pick[h, j]]`` for every head: ``[Hkv, n, D]`` from ``stored`` ``[Hkv, S, D]`` and
    ``pick`` ``[Hkv, n]``. One ``index_select`` over the heads' rows laid end to end: the same values
    as advanced indexing ``stored[heads, pick]`` at about half its cost (the search gathers every
    (row, layer) of every candidate: 16 rows x 30 layers x K and V per candidate in the main job)."""
    if not stored.is_contiguous():
        return stored[torch.arange(stored.shape[0], device=stored.device)[:, None], pick]
    heads, length, dim = stored.shape
    rows = pick + torch.arange(heads, device=pick.device)[:, None] * length  # row of (h, p) in the flat store
    return torch.index_select(stored.view(heads * length, dim), 0, rows.reshape(-1)).view(heads, -1, dim)


def gather_slots(stored: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """``stored[b, h, slots[b, h, j]]`` for every row and head: ``[B, Hkv, W, D]`` from ``stored``
    ``[B, Hkv, S, D]`` and ``slots`` ``[B, Hkv, W]``. ``_gather``'s ``index_select`` over the heads' rows
    laid end to end, batched: the same values as ``stored.gather(2, slots expanded over D)``, which copies
    element by element and was ~50x slower (decode-time eviction gathers every layer at every eviction)."""
    batch, heads, length, dim = stored.shape
    if not stored.is_contiguous():
        stored = stored.contiguous()
    start = torch.arange(batch * heads, device=slots.device).view(batch, heads, 1) * length
    rows = (slots + start).reshape(-1)
    return torch.index_select(stored.view(-1, dim), 0, rows).view(batch, heads, slots.shape[-1], dim)


def _head_dims(layers) -> list[int]:
    """Each layer's head dimension; from a spilled record's known shapes without mapping its file."""
    known = getattr(layers, "shapes", None)
    return [shape[-1] for shape in known] if known is not None else [t.shape[-1] for t in layers]


def _stored_dtype(layers) -> torch.dtype:
    return getattr(layers, "dtype", None) or layers[0].dtype


def compress(record: PrefillRecord, budgets, scorer: Scorer, room: int = 0) -> EvictedCache:
    """One record under one allocation: ``budgets`` is ``[num_layers]`` or ``[num_layers, num_kv_heads]``."""
    return compress_batch([(record, budgets)], scorer, room=room)
