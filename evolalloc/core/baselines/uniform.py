"""Uniform (SnapKV's setting): every (layer, KV head) keeps ``c`` tokens.

A fractional ``c`` is completed to the exact total ``c * L * H``, so budgets then differ by at
most one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evolalloc.core.allocation import complete_budgets
from evolalloc.core.baselines import register_baseline
from evolalloc.core.baselines.base import Baseline


def uniform_budgets(num_layers: int, num_kv_heads: int, target: float, granularity: str = "layer") -> np.ndarray:
    """int64 ``[num_layers, num_kv_heads]`` all at ``target``, completed to the exact total.

    For layer granularity the total is ``round(c * L) * H`` (every head of a layer alike).
    """
    if granularity == "layer":
        per_layer = complete_budgets(np.ones(num_layers, dtype=np.int64), round(target * num_layers), 0)
        return np.repeat(per_layer[:, None], num_kv_heads, axis=1)
    flat = complete_budgets(np.ones(num_layers * num_kv_heads, dtype=np.int64),
                            round(target * num_layers * num_kv_heads), 0)
    return flat.reshape(num_layers, num_kv_heads)


@register_baseline("uniform")
@dataclass
class Uniform(Baseline):

    def budgets(self, geometry, target, *, reserved=0, granularity="layer"):
        return uniform_budgets(geometry.num_layers, geometry.num_kv_heads, target, granularity)
