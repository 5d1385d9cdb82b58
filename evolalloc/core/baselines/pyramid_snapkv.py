"""``pyramid-snapkv``: PyramidKV as published — pyramid budgets above SnapKV's 32-token window,
ranked by SnapKV's default settings — whatever scorer the run ranks with (in a gates run,
``pyramid`` is pyramid budgets over the gates). In a SnapKV run it equals ``pyramid``.
"""

from __future__ import annotations

from dataclasses import dataclass

from evolalloc.core.baselines import register_baseline
from evolalloc.core.baselines.pyramid import Pyramid
from evolalloc.core.baselines.uniform_snapkv import SNAPKV_WINDOW


@register_baseline("pyramid-snapkv")
@dataclass
class PyramidSnapKV(Pyramid):
    order = 7
    color = "#bcbd22"
    default = False

    @property
    def scorer(self) -> tuple[str, dict]:
        return ("snapkv", {})

    @property
    def min_target(self) -> float:
        return SNAPKV_WINDOW + 1

    def budgets(self, geometry, target, *, reserved=0, granularity="layer"):
        # The pyramid above SnapKV's window, not above the run's scorer's always-kept tokens.
        return super().budgets(geometry, target, reserved=SNAPKV_WINDOW, granularity=granularity)

    def provenance(self, *, reserved=0):
        return super().provenance(reserved=SNAPKV_WINDOW)
