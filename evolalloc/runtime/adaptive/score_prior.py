"""The hybrid (``score_prior``, once ``gate_prior``): the global top-k of the retention gates' scores,
shifted by a searched per-layer prior.

Like ``global`` (paper 001's global eviction), each input keeps exactly ``sum(budgets)``
(``c * L * H``) (layer, head, token) entries, every head at least its always-kept tokens, the
rest the best of all by score. Before that one top-k, the ``retention-gates`` scorer's log-utility scores of
(layer, head) are shifted by ``prior_of(budgets)[layer, head] = log(b / mean(b))``: the budgets
are the searched prior (``searchspaces.score_prior``), not per-head caps. A zero prior (equal
budgets) is the ``global`` adapter exactly: the same scores reach the same top-k.

Raising one layer's prior can only move its entries up the global order, so that layer never
keeps fewer tokens (and the others, sharing a fixed total, never more).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from evolalloc.runtime.adaptive import BudgetAdapter, record_scores, register_adapter, top_with_floor
from searchspaces.score_prior import ADAPTER, SCORER, prior_of


@register_adapter(ADAPTER)
@dataclass
class ScorePrior(BudgetAdapter):
    calibrated_scorer = SCORER
    calibrated_use = "shifts"

    def adapt(self, record, budgets, scorer):
        """Per-input budgets int64 ``[num_layers, Hkv]`` summing to ``budgets.sum()`` (capped at every token).

        ``record``'s retention-gates scores are ``[num_layers, Hkv, L]`` in ranking order (always-kept
        ``+inf``, which no finite offset moves).
        """
        self.check(scorer)
        scores = record_scores(record, scorer)
        layers, heads = budgets.shape
        prior = torch.as_tensor(prior_of(budgets), dtype=scores.dtype, device=scores.device)
        # Adding a per-row constant keeps each row non-increasing, as top_with_floor needs.
        shifted = scores + prior[:, :, None]
        counts = top_with_floor(shifted.reshape(layers * heads, -1), scorer.min_budget, int(budgets.sum()))
        return counts.reshape(layers, heads).astype(np.int64)
