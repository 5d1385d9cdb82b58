"""The baseline contract: budgets for a geometry and a target, plus what the baseline needs."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from evolalloc.core.allocation import Allocation
from evolalloc.core.geometry import ModelGeometry


@dataclass
class Baseline:
    """A fixed allocation rule. Subclasses set ``name`` and implement ``budgets``.

    Declarations (class attributes, read without building anything):
        granularity: "layer" (every KV head of a layer alike) or "head".
        order: place in comparison tables and plots (smaller first; evolved is always first).
        color: the plots' colour for it (``None``: matplotlib's next one).
        in_budget_plot: drawn on "budgets per layer" (False when its budgets are another
            baseline's, as streaming's are uniform's).
    Dataclass fields are the baseline's parameters (pyramid's ``beta``, streaming's ``sinks``).
    """

    name: ClassVar[str] = ""
    granularity: ClassVar[str] = "layer"
    order: ClassVar[int] = 100
    color: ClassVar[str | None] = None
    in_budget_plot: ClassVar[bool] = True

    @property
    def scorer(self) -> tuple[str, dict] | None:
        """``(name, params)`` of the scorer this baseline ranks tokens with, or ``None`` for the run's."""
        return None

    @property
    def min_target(self) -> float:
        """The smallest target ``c`` this baseline can hold."""
        return 1

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def budgets(self, geometry: ModelGeometry, target: float, *, reserved: int = 0, granularity: str = "layer") -> np.ndarray:
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
    ) -> Allocation:
        """This baseline at ``target`` as an ``Allocation`` (its own scorer wins over ``scorer``)."""
        if target < self.min_target:
            raise ValueError(f"baseline {self.name!r} needs a target >= {self.min_target:g}, got {target:g}")
        if self.scorer is not None:
            scorer, scorer_params = self.scorer
        granularity = granularity or self.granularity
        return Allocation(
            model=model, geometry=geometry, scorer=scorer, scorer_params=dict(scorer_params or {}),
            target=target, granularity=granularity,
            budgets=self.budgets(geometry, target, reserved=reserved, granularity=granularity),
            provenance={**(provenance or {}), "method": self.name, **self.provenance(reserved=reserved)},
        )
