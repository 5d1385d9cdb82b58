"""A test-only baseline in one file: the inverted pyramid (few tokens at the bottom, many at the
top), the opposite of PyramidKV's shape. Importing this file is all it takes to register it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evolalloc.core.baselines import register_baseline
from evolalloc.core.baselines.base import Baseline
from evolalloc.core.baselines.pyramid import pyramid_layer_budgets


@register_baseline("toy_inverted_pyramid")
@dataclass
class InvertedPyramid(Baseline):
    beta: float = 4

    @property
    def min_target(self) -> float:
        return 2

    def budgets(self, geometry, target, *, reserved=0, granularity="layer"):
        per_layer = pyramid_layer_budgets(geometry.num_layers, target, self.beta, reserved)[::-1].copy()
        return np.repeat(per_layer[:, None], geometry.num_kv_heads, axis=1)
