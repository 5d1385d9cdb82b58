"""The baseline contract: budgets for a geometry and a target, plus what the baseline needs."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from evolalloc.core.allocation import Allocation, fit_to_windows
from evolalloc.core.geometry import ModelGeometry
from evolalloc.core.methods import BASELINES


@dataclass
class Baseline:
    """A fixed allocation rule. Subclasses set ``name`` and implement ``budgets``.

    Declarations (class attributes, read without building anything):
        granularity: "layer" (every KV head of a layer alike) or "head".
        order: place in comparison tables and plots (smaller first; evolved is always first).
        color: the plots' colour for it (``None``: matplotlib's next one).
        in_budget_plot: drawn on "budgets per layer" (False when its budgets are another
            baseline's, as streaming's are uniform's).
        default: in a recipe's default ``baselines`` (False for the input-adaptive methods:
            each one is another held-out evaluation, and ``gates`` needs a trained checkpoint).
        adapts: the method whose budgets this one starts from instead of computing its own
            (``"evolved"`` for ``evolved+adakv``: ``allocation`` then needs ``base=``).
        profiled: built by the run with what it profiles on the search split (``lukv``'s
            ``UtilityCurves``, ``pipeline/lukv.py``), not from its name alone.
    The ``adapter`` property names a runtime budget adapter (``evolalloc.runtime.adaptive``)
    that turns the budgets into per-instance ones when a row is compressed (AdaKV, CAKE).
    Dataclass fields are the baseline's parameters (pyramid's ``beta``, streaming's ``sinks``).
    """

    name: ClassVar[str] = ""
    granularity: ClassVar[str] = "layer"
    order: ClassVar[int] = 100
    color: ClassVar[str | None] = None
    in_budget_plot: ClassVar[bool] = True
    default: ClassVar[bool] = True
    adapts: ClassVar[str | None] = None
    profiled: ClassVar[bool] = False

    @property
    def scorer(self) -> tuple[str, dict] | None:
        """``(name, params)`` of the scorer this baseline ranks tokens with, or ``None`` for the run's."""
        return None

    @property
    def adapter(self) -> tuple[str, dict] | None:
        """``(name, params)`` of the budget adapter applied per instance, or ``None`` (static budgets)."""
        return None

    @property
    def min_target(self) -> float:
        """The smallest target ``c`` this baseline can hold."""
        return 1

    def problem(self) -> str | None:
        """Why this baseline cannot run on this machine (a missing checkpoint...), or ``None``.

        Asked when a recipe (or ``compare --baselines``) names it, before anything is written."""
        return None

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def budgets(self, geometry: ModelGeometry, target: float, *, reserved: int = 0,
                granularity: str = "layer") -> np.ndarray:
        """int64 budgets ``[num_layers, num_kv_heads]`` whose total is exactly ``c * L * H``.

        ``reserved``: tokens the run's scorer always keeps (its sinks and observation window),
        for a baseline that shapes only the budget above them. ``granularity``: the allocation's
        (a layer rule may ignore "head": equal heads are valid there too).
        """
        raise NotImplementedError

    def provenance(self, *, reserved: int = 0) -> dict:
        """What the allocation file records about this baseline besides its method."""
        return self.params()

    def allocation(
        self,
        geometry: ModelGeometry,
        target: float,
        *,
        model: str = "unknown",
        scorer: str = "snapkv",
        scorer_params: dict | None = None,
        reserved: int = 0,
        granularity: str | None = None,
        provenance: dict | None = None,
        base: Allocation | None = None,
    ) -> Allocation:
        """This baseline at ``target`` as an ``Allocation`` (its own scorer wins over ``scorer``).

        ``base``: the allocation a baseline that ``adapts`` another method starts from (its
        budgets, granularity and scorer are kept; only the method changes).
        """
        if self.adapts is not None:
            if base is None:
                raise ValueError(f"{self.name!r} adapts a {self.adapts} allocation at each budget; there is none here")
            return Allocation(
                model=base.model, geometry=base.geometry, scorer=base.scorer, scorer_params=dict(base.scorer_params),
                target=base.target, granularity=base.granularity, budgets=base.budgets.copy(),
                provenance={**base.provenance, **(provenance or {}), "method": self.name,
                            **self.provenance(reserved=reserved)},
            )
        if target < self.min_target:
            raise ValueError(f"baseline {self.name!r} needs a target >= {self.min_target:g}, got {target:g}")
        if self.scorer is not None:
            scorer, scorer_params = self.scorer
        granularity = granularity or self.granularity
        return Allocation(
            model=model, geometry=geometry, scorer=scorer, scorer_params=dict(scorer_params or {}),
            target=target, granularity=granularity,
            budgets=fit_to_windows(self.budgets(geometry, target, reserved=reserved, granularity=granularity),
                                   geometry, granularity),
            provenance={**(provenance or {}), "method": self.name, **self.provenance(reserved=reserved)},
        )


def register_baseline(name: str):
    """Class decorator: register a ``Baseline`` subclass as ``name`` (which sets its ``name``)."""

    def register(cls: type[Baseline]) -> type[Baseline]:
        if not (isinstance(cls, type) and issubclass(cls, Baseline)):
            raise TypeError(f"baseline {name!r} must be a Baseline subclass, got {cls!r}")
        return BASELINES.register(name)(cls)

    if not isinstance(name, str):
        return BASELINES.register(name)  # refuses, naming the idiom
    return register
