"""AdaKV (Feng et al., 2024, arXiv:2407.11550): within each layer, the KV heads share the layer's
budget through one top-k over all their scores, each head keeping at least a floor.

On top of any allocation: layer ``l`` keeps exactly ``sum_h budgets[l, h]`` tokens (its budget
times the heads, for a per-layer allocation), chosen as the top of every head's scores at once,
after every head has kept ``floor = max(always_kept, floor(alpha * budgets[l].sum() / H))`` of
its own best tokens (AdaKV's safeguard; ``alpha`` = 0.2 as kvpress's ``AdaKVPress``).
The scores are the run scorer's (SnapKV's, normally: window attention, comparable across heads).

Departure: AdaKV's reference code gathers the selected tokens into a flattened variable-length
cache; here the runtime pads each layer to its largest head and masks the rest, which computes
the same attention. A layer's budget above ``H x length`` keeps everything.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evolalloc.runtime.adaptive import BudgetAdapter, record_scores, register_adapter, top_with_floor


@register_adapter("adakv")
@dataclass
class AdaKV(BudgetAdapter):
    alpha: float = 0.2

    def __post_init__(self):
        if not 0 <= self.alpha <= 1:
            raise ValueError("adakv alpha (the per-head floor, a fraction of "
                             f"the budget) must be in [0, 1], got {self.alpha}")

    def adapt(self, record, budgets, scorer):
        scores = record_scores(record, scorer)
        layers, heads = budgets.shape
        least = scorer.min_budget
        out = np.empty_like(budgets)
        for layer in range(layers):
            total = int(budgets[layer].sum())
            floor = max(least, int(self.alpha * total / heads))
            out[layer] = top_with_floor(scores[layer], floor, total)
        return out
