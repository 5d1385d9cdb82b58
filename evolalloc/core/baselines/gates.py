"""Global retention gates (paper 001) as a method: no per-layer budgets at all.

The allocation holds uniform budgets only for their total ``c * L * H``; per instance the
runtime keeps the top ``c * L * H`` (layer, head, token) entries by the ``gates`` scorer's
calibrated scores (``runtime.adaptive.global_topk``), every head keeping at least its
always-kept tokens. Needs a checkpoint from ``evolalloc gates train`` (default path below).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evolalloc.core.baselines import register_baseline
from evolalloc.core.baselines.uniform import Uniform

#: Same as ``evolalloc.runtime.scorers.gates.DEFAULT_CHECKPOINT`` (core cannot import the runtime).
DEFAULT_CHECKPOINT = "~/.cache/evolalloc/gates/gates.pt"


@register_baseline
@dataclass
class GlobalGates(Uniform):
    name = "gates"
    order = 14
    color = "#7f7f7f"
    default = False
    in_budget_plot = False  # its real budgets are per instance; `evolalloc gates eval` plots their mean
    checkpoint: str = DEFAULT_CHECKPOINT

    @property
    def scorer(self):
        return ("gates", {"checkpoint": self.checkpoint})

    @property
    def min_target(self) -> float:
        return 20  # the gates scorer's 4 sinks + 16 window tokens per head

    @property
    def adapter(self):
        return ("global", {})

    def problem(self):
        if not Path(self.checkpoint).expanduser().is_file():
            return f"method 'gates' needs a gates checkpoint at {self.checkpoint}; train one with `evolalloc gates train TRACES`"
        return None

    def provenance(self, *, reserved=0):
        return {}  # the checkpoint is in scorer_params
