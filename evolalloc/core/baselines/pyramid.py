"""PyramidKV (Cai et al., 2024, arXiv:2406.02069): budgets fall arithmetically from the bottom
layer to the top one, on top of the always-kept observation window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evolalloc.core.baselines import register_baseline
from evolalloc.core.baselines.base import Baseline


def pyramid_layer_budgets(num_layers: int, target: float, beta: float = 20, reserved: int = 0) -> np.ndarray:
    """PyramidKV budgets ``[num_layers]`` (int64), bottom layer first, summing to ``round(c * L)``.

    The published rule (§3.3; reference code ``PyramidKVCluster``): with a per-layer share
    ``s = c - reserved`` (the budget above the always-kept observation window), the top layer
    gets ``s / beta``, the bottom layer ``2 s - s / beta``, and the layers in between follow the
    arithmetic sequence between them, so the mean is exactly ``s``. ``reserved`` is then added
    to every layer.

    Where we differ from the reference code, on purpose: it floors the top budget and the step
    separately, so its total falls short of ``c * L`` by up to ``L`` tokens; we keep the exact
    real-valued sequence and round once (largest remainder, ties to the lower layer), so the
    total is exact, as the EvolKV comparison requires, and the budgets stay non-increasing.
    """
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    if beta < 1:
        raise ValueError(f"beta must be >= 1 (beta = 1 is uniform), got {beta}")
    share = float(target) - reserved
    if share <= 0:
        raise ValueError(f"target ({target}) must exceed the reserved tokens ({reserved})")
    top = share / beta
    bottom = 2 * share - top
    if num_layers == 1:
        exact = np.array([share])
    else:
        exact = bottom - (bottom - top) * np.arange(num_layers) / (num_layers - 1)
    exact = exact + reserved
    budgets = np.floor(exact).astype(np.int64)
    missing = round(float(target) * num_layers) - int(budgets.sum())
    fractions = exact - budgets
    order = np.lexsort((np.arange(num_layers), -fractions))
    budgets[order[:missing]] += 1
    return budgets


@register_baseline("pyramid")
@dataclass
class Pyramid(Baseline):
    """``reserved`` (the run scorer's always-kept tokens) sits under the pyramid: PyramidKV's
    observation window is kept on top of its pyramid, not carved out of it."""

    beta: float = 20

    def budgets(self, geometry, target, *, reserved=0, granularity="layer"):
        per_layer = pyramid_layer_budgets(geometry.num_layers, target, self.beta, reserved)
        return np.repeat(per_layer[:, None], geometry.num_kv_heads, axis=1)

    def least_target(self, reserved):
        return max(self.min_target, reserved + 1)  # a share above the always-kept tokens

    def provenance(self, *, reserved=0):
        return {"beta": self.beta, "reserved": reserved}
