"""CAKE-style layer preference (Qin et al., ICLR 2025, arXiv:2503.12491), as a method.

The allocation holds uniform budgets (the total ``c * L * H``); per instance the runtime shares
that total among layers by each layer's window-attention dispersion
(``runtime.adaptive.cake``, where the departures from the paper are listed).
"""

from __future__ import annotations

from dataclasses import dataclass

from evolalloc.core.baselines import register_baseline
from evolalloc.core.baselines.uniform import Uniform


@register_baseline("cake")
@dataclass
class Cake(Uniform):
    order = 13
    color = "#8c564b"
    default = False
    in_budget_plot = False  # its static budgets are uniform's; the per-instance ones are in the records
    tau1: float = 1.0
    tau2: float = 1.0

    @property
    def adapter(self):
        return ("cake", {"tau1": self.tau1, "tau2": self.tau2})
