"""The baseline contract: budgets for a geometry and a target, plus what the baseline needs."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from evolalloc.core.allocation import Allocation, fit_to_windows
from evolalloc.core.geometry import ModelGeometry
from evolalloc.core.methods import BASELINES
from evolalloc.core.scorer_names import canonical_scorer


@dataclass
class Baseline:
    """A fixed allocation rule. Subclasses set ``name`` and implement ``budgets``.

    Declarations (class attributes, read without building anything):
        granularity: "layer" (every KV head of a layer alike) or "head".
        default: in a recipe's default ``baselines`` (False for the rules that need more than a
            name: ``global-topk`` a trained checkpoint, ``lukv`` its profiled curves).
        profiled: built by the run with what it profiles on the search split (``lukv``'s
            ``UtilityCurves``, ``pipeline/lukv.py``), not from its name alone.
    A rule may declare a ``scorer`` of its own (streaming's) and an ``adapter`` (a runtime budget
    adapter, ``evolalloc.runtime.adaptive``: global-topk's one top-k). Other pairings are compositions
    (``core/composition.py``, built by ``core/baselines/composed.py``); where a method sits in tables
    and plots is the report's (``report/method_style.py``).
    Dataclass fields are the baseline's parameters (pyramid's ``beta``, streaming's ``sinks``).
    """

    name: ClassVar[str] = ""
    granularity: ClassVar[str] = "layer"
    default: ClassVar[bool] = True
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

    def least_target(self, reserved: int) -> float:
        """The smallest target this rule can hold above ``reserved`` always-kept tokens (a composition's
        scorer's): the budget must hold them."""
        return max(self.min_target, reserved)

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
        method: str | None = None,
    ) -> Allocation:
        """This baseline at ``target`` as an ``Allocation`` (its own scorer wins over ``scorer``);
        ``method``: the label its provenance names (a composition's; default the rule's name)."""
        if target < self.min_target:
            raise ValueError(f"baseline {self.name!r} needs a target >= {self.min_target:g}, got {target:g}")
        if self.scorer is not None:
            declared, scorer_params = self.scorer
            # The run's own spelling of the same scorer stays (an old recipe's ``gates``): one ranking, as written.
            scorer = scorer if canonical_scorer(scorer) == declared else declared
        granularity = granularity or self.granularity
        return Allocation(
            model=model, geometry=geometry, scorer=scorer, scorer_params=dict(scorer_params or {}),
            target=target, granularity=granularity,
            budgets=fit_to_windows(self.budgets(geometry, target, reserved=reserved, granularity=granularity),
                                   geometry, granularity),
            provenance={**(provenance or {}), "method": method or self.name, **self.provenance(reserved=reserved)},
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
