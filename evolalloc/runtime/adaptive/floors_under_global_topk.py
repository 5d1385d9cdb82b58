"""Floors + global (``floors_under_global_topk``, once ``gate_floors``): every head keeps a static floor,
the rest goes by the global top-k of the retention gates' scores.

The ``global`` adapter (paper 001) compares every (layer, head, token) by the retention gates' calibrated
scores; below the budget where that calibration holds it starves heads (measured on the word
prose needle: 0.25 at c = 48 against uniform SnapKV's 0.88). Static budgets cannot starve a head
but cannot move memory to where an input needs it. This adapter blends them: head ``(l, h)`` first
keeps its best ``floor[l, h] = max(min_budget, floor(floor_fraction * b[l, h]))`` entries, then the
remaining ``sum(b) - sum(floor)`` go to the best remaining entries of all heads at once.

``floor_fraction`` 1.0 keeps exactly ``b`` (when no head's budget exceeds its tokens); 0.0 is
``global`` exactly (the same floors, ``min_budget``, reach the same top-k).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evolalloc.runtime.adaptive import BudgetAdapter, record_scores, register_adapter, top_with_floor
from searchspaces.floors_under_global_topk import ADAPTER, DEFAULT_FLOOR_FRACTION, SCORER, check_floor_fraction


def floors_of(budgets, floor_fraction: float, min_budget: int) -> np.ndarray:
    """int64 ``[num_layers, Hkv]``: ``max(min_budget, floor(floor_fraction * budgets))``."""
    budgets = np.asarray(budgets, dtype=np.int64)
    # floor() of a product can land one below an integer (0.5 * 3 is exact, 0.7 * 10 is 6.9999...):
    # a tiny epsilon keeps floor_fraction 1.0 and exact products where they belong.
    scaled = np.floor(floor_fraction * budgets.astype(np.float64) + 1e-9).astype(np.int64)
    return np.maximum(scaled, int(min_budget))


@register_adapter(ADAPTER)
@dataclass
class FloorsUnderGlobalTopK(BudgetAdapter):
    calibrated_scorer = SCORER
    calibrated_use = "ranks by one global top-k"
    floor_fraction: float = DEFAULT_FLOOR_FRACTION

    def __post_init__(self):
        self.floor_fraction = check_floor_fraction(self.floor_fraction)

    def adapt(self, record, budgets, scorer):
        """Per-input budgets int64 ``[num_layers, Hkv]`` summing to ``budgets.sum()`` (capped at every token).

        ``record``'s retention-gates scores are ``[num_layers, Hkv, T]`` in ranking order (always-kept ``+inf``).
        """
        self.check(scorer)
        scores = record_scores(record, scorer)
        layers, heads = budgets.shape
        floors = floors_of(budgets, self.floor_fraction, scorer.min_budget).reshape(-1)
        counts = top_with_floor(scores.reshape(layers * heads, -1), floors, int(budgets.sum()))
        return counts.reshape(layers, heads).astype(np.int64)
