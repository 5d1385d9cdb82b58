"""The full cache as a comparison row: every (layer, KV head) keeps every token, at any ``c``.

Not an allocation to ship: the ceiling a table reads every method against, scored in the run's own
comparison on the same held-out prefill as the other rows, instead of a second prefill of whole
records (``benchmarks/design_scores.py``; results/long-context-8k: the held-out split prefilled
once for every row). Its budgets are the model's positions in every unit, whatever the target, so
it alone does not keep the total ``c * L * H`` (on purpose); a sliding-window layer keeps what its
window can use (``fit_to_windows``: ``W - 1`` prompt tokens), which is its full cache. A run that
names it keeps whole held-out records (``pipeline/record_bound.py`` bounds by the largest static
budget): more memory and disk at long context, which ``evolalloc search --plan`` shows first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evolalloc.core.baselines import register_baseline
from evolalloc.core.baselines.base import Baseline


@register_baseline("full")
@dataclass
class FullCache(Baseline):
    default = False  # opt in: it makes the held-out records whole

    def budgets(self, geometry, target, *, reserved=0, granularity="layer"):
        return np.full((geometry.num_layers, geometry.num_kv_heads), geometry.max_positions, dtype=np.int64)

    def provenance(self, *, reserved=0):
        return {}
