"""CAKE-style layer preference (Qin et al., ICLR 2025, arXiv:2503.12491): per-instance layer budgets.

From the prefill's window attention, each layer gets a preference
``P_l = H_l ** (1 / tau1) * V_l ** (1 / tau2)`` — ``H_l`` the entropy of the window's mean
attention (spatial dispersion), ``V_l`` the variance of each key's attention over the window
queries, summed over keys (temporal shift), both averaged over heads
(``runtime.prefill.window_dispersion``) — and the layers split the total budget in proportion:
``B_l ∝ P_l``. The total is the allocation's (``c * L`` tokens per head, ``c * L * H`` in all),
kept exactly.

Where this departs from CAKE:
* CAKE allocates while it prefills, layer by layer ("cascading"), to bound peak memory; we
  measure every layer in the one full prefill and allocate after it — the same budgets, since
  the preferences do not depend on the order they are computed in.
* CAKE ranks tokens with its own indicator (window attention mean plus a multiple of its
  variance); here tokens are ranked by the run's scorer (SnapKV by default), so this isolates
  the *allocation* CAKE makes.
* every layer keeps at least the scorer's always-kept tokens (sinks + window) and at most the
  prompt (a layer's share beyond it goes to the others, in proportion); CAKE has no floor.
* ``tau1 = tau2 = 1`` by default; CAKE tunes them per model.
Within a layer every KV head gets the same budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evolalloc.runtime.adaptive import BudgetAdapter, register_adapter


def preference(dispersion, tau1: float = 1.0, tau2: float = 1.0) -> np.ndarray:
    """``[L, 2]`` (entropy, variance) -> ``[L]`` CAKE preference scores (float64, >= 0)."""
    values = np.asarray(dispersion, dtype=np.float64).clip(min=0)
    return values[:, 0] ** (1.0 / tau1) * values[:, 1] ** (1.0 / tau2)


def share_out(weights: np.ndarray, total: int, floor: int, cap: int) -> np.ndarray:
    """int64 ``[L]`` in ``[floor, cap]`` summing to ``total``, above the floor in proportion to ``weights``.

    Layers that would exceed ``cap`` are held there and their surplus shared by the rest;
    rounding by largest remainder (ties to the lower layer). Needs ``L * floor <= total <= L * cap``.
    """
    layers = len(weights)
    if not layers * floor <= total <= layers * cap:
        raise ValueError(f"{total} tokens cannot be split over {layers} layers within [{floor}, {cap}] each")
    weights = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(weights)) or weights.sum() <= 0:
        weights = np.ones(layers)
    exact = np.full(layers, float(floor))
    free = np.ones(layers, dtype=bool)
    left = float(total - layers * floor)
    while left > 1e-9 and free.any():
        w = np.where(free, weights, 0.0)
        if w.sum() <= 0:
            w = free.astype(np.float64)
        exact = exact + left * w / w.sum()
        over = exact > cap
        left = float((exact[over] - cap).sum())
        exact[over] = cap
        free &= ~over
    budgets = np.floor(exact + 1e-9).astype(np.int64)
    missing = total - int(budgets.sum())
    order = np.lexsort((np.arange(layers), -(exact - budgets)))
    room = [i for i in order if budgets[i] < cap]
    budgets[room[:missing]] += 1
    return budgets


@register_adapter("cake")
@dataclass
class Cake(BudgetAdapter):
    tau1: float = 1.0
    tau2: float = 1.0

    def __post_init__(self):
        if self.tau1 <= 0 or self.tau2 <= 0:
            raise ValueError(f"cake tau1 and tau2 must be > 0, got {self.tau1}, {self.tau2}")

    def adapt(self, record, budgets, scorer):
        if getattr(record, "dispersion", None) is None:
            raise ValueError(f"record {record.uid!r} has no window attention measures: CAKE needs a scorer with an "
                             "observation window (e.g. snapkv)")
        layers, heads = budgets.shape
        total = int(budgets.sum())
        floor = scorer.min_budget
        # A head keeps at most the prompt, or a bounded record's b_max (the run's cap on any unit).
        cap = max(min(record.length, getattr(record, "bound", None) or record.length), floor)
        # One budget per layer for all its heads, summing to c * L; an indivisible total (a
        # head-granularity allocation) leaves < H tokens, given to the most preferred layer's first heads.
        per_head, rest = divmod(total, heads)
        if per_head >= layers * cap:  # a budget beyond the prompt everywhere: keep it all (compress clips)
            return np.full_like(budgets, cap)
        weights = preference(record.dispersion.numpy(), self.tau1, self.tau2)
        per_layer = share_out(weights, per_head, floor, cap)
        out = np.repeat(per_layer[:, None], heads, axis=1)
        if rest:
            room = np.flatnonzero(per_layer < cap)
            out[room[np.argmax(weights[room])], :rest] += 1
        return out
