"""Global eviction (the retention-gates paper, 001): one top-k over every (layer, head, token).

The allocation's total ``sum(budgets)`` (``c * L * H``) is kept as a whole: every head keeps its
always-kept tokens (at least one), then the best of everything else, compared across layers and
heads by score. Only meaningful when scores are on one scale everywhere — the ``retention-gates`` scorer's
are, by its shared final projection; a heuristic's (SnapKV's) are not calibrated across layers.
"""

from __future__ import annotations

from dataclasses import dataclass

from evolalloc.runtime.adaptive import BudgetAdapter, record_scores, register_adapter, top_with_floor


@register_adapter("global")
@dataclass
class GlobalTopK(BudgetAdapter):

    def adapt(self, record, budgets, scorer):
        scores = record_scores(record, scorer)
        layers, heads = budgets.shape
        counts = top_with_floor(scores.reshape(layers * heads, -1), scorer.min_budget, int(budgets.sum()))
        return counts.reshape(layers, heads)
