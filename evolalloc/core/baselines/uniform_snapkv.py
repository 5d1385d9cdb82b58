"""``uniform-snapkv``: SnapKV as published — uniform budgets ranked by SnapKV's default settings —
whatever scorer the run ranks with.

In a run whose scorer is ``gates`` (or ``learned``), ``uniform`` ranks with that scorer: it is
uniform-gates. This row keeps the heuristic in the same table as the learned scorer. In a SnapKV
run it equals ``uniform``.
"""

from __future__ import annotations

from dataclasses import dataclass

from evolalloc.core.baselines import register_baseline
from evolalloc.core.baselines.uniform import Uniform

# SnapKV's always-kept observation window (runtime.scorers.snapkv's default). A constant here, not
# an import: the baselines sit below the runtime.
SNAPKV_WINDOW = 32


@register_baseline("uniform-snapkv")
@dataclass
class UniformSnapKV(Uniform):
    order = 6
    color = "#17becf"
    default = False  # in a SnapKV run it is `uniform` again
    in_budget_plot = False  # its budgets are uniform's

    @property
    def scorer(self) -> tuple[str, dict]:
        return ("snapkv", {})

    @property
    def min_target(self) -> float:
        return SNAPKV_WINDOW

    def provenance(self, *, reserved=0):
        return {}
