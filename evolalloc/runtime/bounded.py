"""Bounded records: keep only the K/V any allocation of the run can use.

The kept set of a (layer, KV head) at budget ``b`` is the top-``b`` prefix of a ranking, so
when no allocation of a run gives a unit more than ``b_max`` tokens, every token outside the
top-``b_max`` prefix of every captured ranking is never read. A bounded record stores, per
(layer, KV head), only the union of those prefixes (the always-kept sinks and window rank
first, so they are in it), in position order, and its rankings become indices into that
store. ``compress`` gathers from it exactly what it gathers from the full record, in the same
order, so kept tokens, logits and likelihoods are bit-identical at every budget <= ``b_max``;
a budget above it is refused (``RecordBoundError``) naming ``b_max``.

What the decode and likelihood paths need besides K/V (``length``, ``first_logits``,
``question_ids``, ``prompt_ids``, ``dispersion``) is kept whole: it is small.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from evolalloc.runtime.prefill import PrefillRecord


class RecordBoundError(ValueError):
    """A budget above what a bounded record holds (an evaluator may re-prefill the instance)."""


def bound_record(record: PrefillRecord, b_max: int | None) -> PrefillRecord:
    """``record`` with only the K/V of the union of each ranking's top-``b_max`` prefix.

    ``b_max`` ``None``, or >= the prompt length: the record is returned as it is (nothing to
    drop). Otherwise per layer keys/values become ``[Hkv, m, D]`` (``m`` = the largest head's
    union; a smaller head's spare slots are zeros no ranking points at), each ranking
    ``[num_layers, Hkv, b_max]`` holds indices into those slots, and each ``scores`` entry
    keeps its first ``b_max`` columns (ranking order). ``record.bound`` is set to ``b_max``.
    """
    if b_max is None or b_max >= record.length or record.bound is not None:
        if record.bound is not None and b_max is not None and b_max > record.bound:
            raise ValueError(f"record {record.uid!r} is already bounded at {record.bound} < {b_max}")
        return record  # (a record bounded at more than b_max serves b_max too)
    if b_max < 1:
        raise ValueError(f"b_max must be >= 1, got {b_max}")
    if not record.rankings:
        raise ValueError(f"record {record.uid!r} has no ranking to bound by")
    heads = record.keys[0].shape[0]
    length = record.length
    tops = torch.stack([ranking[..., :b_max] for ranking in record.rankings.values()], dim=2)  # [layers, Hkv, S, b]
    keys, values, slot_positions = [], [], []
    local_rankings = {name: [] for name in record.rankings}
    for layer in range(record.num_layers):
        member = torch.zeros(heads, length, dtype=torch.bool, device=tops.device)
        member.scatter_(1, tops[layer].reshape(heads, -1), True)  # [Hkv, L]: in some top-b_max prefix
        sizes = member.sum(dim=1)
        width = int(sizes.max())
        # Kept positions of each head in position order (so a sorted slot order is a sorted
        # position order), spare slots pointing at position 0 and zeroed below.
        slot_of = torch.cumsum(member, dim=1) - 1  # [Hkv, L]: a member's slot index
        positions = torch.zeros(heads, width, dtype=torch.long, device=tops.device)
        rows, cols = member.nonzero(as_tuple=True)
        positions[rows, slot_of[rows, cols]] = cols
        spare = torch.arange(width, device=tops.device)[None, :] >= sizes[:, None]  # [Hkv, m]
        slot_positions.append(positions)
        head_index = torch.arange(heads, device=tops.device)[:, None]
        for store, source in ((keys, record.keys[layer]), (values, record.values[layer])):
            kept = source[head_index.to(source.device), positions.to(source.device)]  # [Hkv, m, D]
            kept[spare.to(source.device)] = 0
            store.append(kept)
        for name, ranking in record.rankings.items():
            top = ranking[layer, :, :b_max]
            local_rankings[name].append(torch.gather(slot_of, 1, top))
    return replace(
        record,
        keys=keys,
        values=values,
        rankings={name: torch.stack(per_layer) for name, per_layer in local_rankings.items()},
        scores={name: s[..., :b_max].contiguous() for name, s in record.scores.items()},
        bound=int(b_max),
        slot_positions=_stack_padded(slot_positions),
    )


def _stack_padded(per_layer: list[torch.Tensor]) -> torch.Tensor:
    """Per layer ``[Hkv, m_l]`` -> ``[layers, Hkv, max m_l]``, zero-padded (spare slots point at 0)."""
    width = max(t.shape[1] for t in per_layer)
    out = per_layer[0].new_zeros(len(per_layer), per_layer[0].shape[0], width)
    for layer, t in enumerate(per_layer):
        out[layer, :, : t.shape[1]] = t
    return out


def check_within_bound(record: PrefillRecord, budgets) -> None:
    """Refuse (``RecordBoundError``) budgets a bounded record cannot serve: above ``b_max`` and
    below the prompt length (a budget >= the prompt keeps everything only in a full record)."""
    if record.bound is None:
        return
    largest = int(np.minimum(np.asarray(budgets), record.layer_reach()[:, None]).max())
    if largest > record.bound:
        raise RecordBoundError(
            f"a budget of {largest} tokens is above b_max = {record.bound}, the most this run's records keep per "
            f"(layer, KV head) (record {record.uid!r}); evaluate it in a run whose budgets include it")
