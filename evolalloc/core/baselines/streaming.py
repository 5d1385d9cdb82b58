"""StreamingLLM (Xiao et al., 2024, arXiv:2309.17453) as a baseline: uniform budgets, and each
budget holds the ``sinks`` first tokens plus the most recent ones (the ``streaming`` scorer).

It needs that scorer's rankings in the prefill records, whatever scorer the run searches with,
and a target of at least ``sinks`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from evolalloc.core.baselines import register_baseline
from evolalloc.core.baselines.base import Baseline
from evolalloc.core.baselines.uniform import uniform_budgets


@register_baseline("streaming")
@dataclass
class Streaming(Baseline):
    sinks: int = 4

    @property
    def scorer(self) -> tuple[str, dict]:
        return ("streaming", {"sinks": self.sinks})

    @property
    def min_target(self) -> float:
        return self.sinks

    def budgets(self, geometry, target, *, reserved=0, granularity="layer"):
        return uniform_budgets(geometry.num_layers, geometry.num_kv_heads, target, granularity)

    def provenance(self, *, reserved=0):
        return {}  # the sinks are in scorer_params already
