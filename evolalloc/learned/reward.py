"""The all-budgets eviction reward of KV Policy (paper §3.1.1, Eq. 4-5), in O(n) per ranking.

A ranking ``sigma`` orders ``n`` tokens from most to least important. At budget ``b`` the top-``b``
are kept and the cost is the future-attention importance of the evicted rest:

    cost_b(sigma) = sum_{i > b} w[sigma_i]          (Eq. 5, negated)
    cost(sigma)   = sum_{b=1}^{n-1} cost_b(sigma)   (Eq. 4, negated)

The token at rank ``r`` (1-based) is evicted at every budget ``b < r``, i.e. ``r - 1`` times, so

    cost(sigma) = sum_r (r - 1) * w[sigma_r]

— one weighted sum, O(n) once the ranking is known. By the rearrangement inequality the optimum
is sorting by ``w`` descending; the reward is normalised by that optimum's cost (paper: "to
create an objective invariant to scale"): ``reward = -cost(sigma) / cost(sigma*)``, so the best
ranking scores exactly -1 and a uniformly random one ``-(n-1)/2 * sum(w) / cost*`` on average.
"""

from __future__ import annotations

import torch


def ranking_cost(importance: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """Total eviction cost over all budgets, O(n).

    importance ``[..., n]`` (non-negative); order ``[..., K, n]`` or ``[..., n]`` token indices,
    most important first. Returns ``[..., K]`` (or ``[...]``) float32.
    """
    n = order.shape[-1]
    weights = importance.float()
    if order.dim() == importance.dim() + 1:
        weights = weights.unsqueeze(-2).expand(*order.shape)
    ranked = torch.gather(weights, -1, order)
    evictions = torch.arange(n, device=order.device, dtype=torch.float32)  # rank r is evicted r - 1 times
    return (ranked * evictions).sum(-1)


def optimal_cost(importance: torch.Tensor) -> torch.Tensor:
    """Cost of sorting by true importance, ``[..., n] -> [...]`` (the minimum over all rankings)."""
    return ranking_cost(importance, torch.argsort(importance.float(), dim=-1, descending=True))


def normalised_reward(importance: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """``-cost(order) / cost(optimal)``: ``[..., n]`` with ``[..., K, n]`` orders -> ``[..., K]``.

    When the optimum costs nothing (no importance outside the top token) every ranking is
    equally good and the reward is -1.
    """
    best = optimal_cost(importance)
    if order.dim() == importance.dim() + 1:
        best = best.unsqueeze(-1)
    cost = ranking_cost(importance, order)
    safe = torch.where(best > 0, best, torch.ones_like(best))
    return torch.where(best > 0, -cost / safe, -torch.ones_like(cost))


def cost_per_budget(importance: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """``cost_b`` for every budget ``b = 0..n``: importance ``[..., n]``, order ``[..., n]`` -> ``[..., n + 1]``.

    ``cost_b`` is the importance *not* in the top-``b`` prefix (a reverse cumulative sum), so
    ``cost_0`` is the total and ``cost_n`` is zero.
    """
    ranked = torch.gather(importance.float(), -1, order)
    kept = torch.cumsum(ranked, dim=-1)
    total = kept[..., -1:]
    # Clamp: float rounding can leave -1e-7 where the true remainder is 0.
    return torch.cat([total, total - kept], dim=-1).clamp_min(0.0)
