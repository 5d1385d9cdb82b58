"""AdaKV (Feng et al., 2024, arXiv:2407.11550) on top of a per-layer allocation.

Each method keeps its base's budgets per layer (uniform's, pyramid's, or the searched profile's)
and lets AdaKV share every layer's budget among its KV heads per instance, from the run
scorer's scores, with a floor of ``alpha`` (0.2, kvpress's ``AdaKVPress`` default) of the
head's share. The sharing happens in the runtime (``runtime.adaptive.adakv``), when a prefill
record is compressed: the allocation file holds the base budgets.
"""

from __future__ import annotations

from dataclasses import dataclass

from evolalloc.core.baselines import EVOLVED, register_baseline
from evolalloc.core.baselines.base import Baseline
from evolalloc.core.baselines.pyramid import Pyramid
from evolalloc.core.baselines.uniform import Uniform


@dataclass
class _AdaKV:
    """Mixin: AdaKV's adapter with its floor fraction."""

    default = False
    in_budget_plot = False  # its static budgets are its base's
    alpha: float = 0.2

    @property
    def adapter(self):
        return ("adakv", {"alpha": self.alpha})


@register_baseline("uniform+adakv")
@dataclass
class UniformAdaKV(_AdaKV, Uniform):
    order = 11
    color = "#17becf"

    def provenance(self, *, reserved=0):
        return {"alpha": self.alpha, "base": "uniform"}


@register_baseline("pyramid+adakv")
@dataclass
class PyramidAdaKV(_AdaKV, Pyramid):
    order = 12
    color = "#bcbd22"

    def provenance(self, *, reserved=0):
        return {"alpha": self.alpha, "base": "pyramid", "beta": self.beta, "reserved": reserved}


@register_baseline("evolved+adakv")
@dataclass
class EvolvedAdaKV(_AdaKV, Baseline):
    order = 10
    color = "#e377c2"
    adapts = EVOLVED

    def provenance(self, *, reserved=0):
        return {"alpha": self.alpha, "base": EVOLVED}
