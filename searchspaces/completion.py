"""EvolKV §3.2 completion: scale integer budgets to an exact total, on plain arrays.

It lives in this leaf package because two floors use it: the allocation model completes a
searched profile to ``c * L`` (``evolalloc.core.allocation``), and a search space under the exact
budget rule completes every candidate before it is evaluated (``SearchSpace.decode``).
"""

from __future__ import annotations

import numpy as np

# The cap of a unit that has none (a full-attention layer): far above any budget, far below overflow.
NO_CAP = np.iinfo(np.int64).max // 4


def complete_budgets(units: np.ndarray, total: int, floor: int = 1, caps: np.ndarray | None = None) -> np.ndarray:
    """``_complete`` under per-unit ``caps`` (``[n]``, ``None``: no cap; a sliding-window layer's
    ``W - 1``): a unit whose share exceeds its cap is held at the cap and the rest of ``total`` is
    completed over the others, until none exceeds its own. A total above what all caps hold gives
    every unit its cap. Without caps this is exactly EvolKV's completion (below).
    """
    if caps is None:
        return _complete(units, total, floor)
    k = np.asarray(units)
    caps = np.asarray(caps, dtype=np.int64)
    if caps.shape != k.shape:
        raise ValueError(f"caps must have the units' shape {k.shape}, got {caps.shape}")
    budgets = np.zeros(k.shape, dtype=np.int64)
    free = np.ones(k.shape, dtype=bool)
    while free.any():
        share = _complete(k[free], max(int(total) - int(budgets[~free].sum()), 0),
                          0 if total < floor * free.sum() else floor)
        over = share > caps[free]
        if not over.any():
            budgets[free] = share
            break
        capped = np.flatnonzero(free)[over]
        budgets[capped] = caps[capped]
        free[capped] = False
    return budgets


def _complete(units: np.ndarray, total: int, floor: int = 1) -> np.ndarray:
    """Scale non-negative integer budgets ``[n]`` to sum to exactly ``total``; returns int64 ``[n]``.

    EvolKV §3.2: with ``A = sum(k)``, ``b_i = ceil(k_i + k_i / A * (T - A)) = ceil(k_i * T / A)``.
    The ceilings overshoot ``T`` by fewer than ``n``; that excess is taken back one token at a
    time from the largest budgets among those that were rounded up, so every ``b_i`` stays in
    ``{floor(k_i T / A), ceil(k_i T / A)}``. That choice is what makes expansion monotone: for
    ``T >= A`` no unit ends below its old budget and the order of units is kept.

    Ties (equal budgets) give back first from the unit whose exact share was furthest from its
    ceiling, then from the lower index, so the result is deterministic.

    ``floor`` is respected: units whose share falls below it are raised to it, and what that
    costs is then taken from the largest budgets (water-filling from the top), never pushing one
    below ``floor``. All arithmetic is on integers, so there is no float rounding drift.

    Raises ``ValueError`` if ``total < floor * n`` (no way to honour both).
    """
    k = np.asarray(units)
    if k.ndim != 1 or k.size == 0:
        raise ValueError(f"expected a non-empty 1-D budget vector, got shape {k.shape}")
    if not np.all(np.equal(np.mod(k, 1), 0)) or np.any(k < 0):
        raise ValueError("budgets must be non-negative integers")
    k = k.astype(np.int64)
    n, total, floor = k.size, int(total), int(floor)
    if floor < 0:
        raise ValueError(f"floor must be >= 0, got {floor}")
    if total < floor * n:
        raise ValueError(f"a total of {total} cannot give {n} units at least {floor} each")
    if k.sum() == 0:
        k = np.ones(n, dtype=np.int64)  # no shares to scale: treat as uniform
    current = int(k.sum())

    scaled = k * total
    lower, remainder = scaled // current, scaled % current
    upper = lower + (remainder > 0)
    budgets = np.maximum(upper, floor)
    excess = int(budgets.sum()) - total

    # 1) Undo roundings up, largest budgets first, never below floor(k_i T / A) or the floor.
    can_give = (remainder > 0) & (lower >= floor)
    candidates = np.flatnonzero(can_give)
    order = np.lexsort((candidates, remainder[candidates], -budgets[candidates]))
    taken = candidates[order[:excess]]
    budgets[taken] -= 1
    excess -= taken.size

    # 2) Only the floor can leave an excess now: lower the tallest budgets level by level.
    while excess > 0:
        top = int(budgets.max())
        at_top = np.flatnonzero(budgets == top)
        below = budgets[budgets < top]
        level = max(int(below.max()) if below.size else floor, floor)
        room = (top - level) * at_top.size
        if room <= excess:
            budgets[at_top] = level
            excess -= room
            continue
        whole, extra = divmod(excess, at_top.size)
        budgets[at_top] -= whole
        ties = at_top[np.lexsort((at_top, remainder[at_top]))]
        budgets[ties[:extra]] -= 1
        excess = 0
    return budgets
