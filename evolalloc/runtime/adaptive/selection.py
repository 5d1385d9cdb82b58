"""The scorer an allocation selects tokens with: its own, wrapped in the budget adapter it names.

One place for the rule, used by every path that runs an allocation (``evaluate``, ``compare``,
``generate``): an input-adaptive method's adapter comes from its baseline (AdaKV, CAKE, the global
gates: ``Baseline.adapter``); a searched profile whose budgets an adapter reads (the hybrid,
``searchspaces.gate_prior``) names it in ``provenance.adapter``.
"""

from __future__ import annotations

from evolalloc.core.baselines import BASELINES, make_baseline
from evolalloc.runtime.adaptive import Adapted, get_adapter
from evolalloc.runtime.scorers import Scorer, get_scorer


def allocation_adapter(allocation) -> tuple[str, dict] | None:
    """``(name, params)`` of the adapter ``allocation``'s budgets are meant for, or ``None`` (static budgets)."""
    method = allocation.provenance.get("method")
    if method in BASELINES.load_all():
        declared = make_baseline(method).adapter
        if declared is not None:
            return declared
    named = allocation.provenance.get("adapter")
    return (named, {}) if named else None


def scorer_for_allocation(allocation) -> Scorer:
    """``allocation``'s scorer, ``Adapted`` when it names an adapter; ``ValueError`` (an unknown scorer or
    adapter, or an adapter that cannot read that scorer's scores)."""
    scorer = get_scorer(allocation.scorer, **allocation.scorer_params)
    adapter = allocation_adapter(allocation)
    if adapter is None:
        return scorer
    return Adapted(scorer, get_adapter(adapter[0], **adapter[1]))
