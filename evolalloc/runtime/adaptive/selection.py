"""The scorer an allocation selects tokens with: its own, wrapped in the budget adapter it names.

One place for the rule, used by every path that runs an allocation (``evaluate``, ``compare``,
``generate``): an input-adaptive method's adapter comes from its composition (AdaKV, CAKE, global-topk:
``core.composition.allocation_adapter``); a searched profile whose budgets an adapter reads (the hybrid,
``searchspaces.score_prior``) names it in ``provenance.adapter``.
"""

from __future__ import annotations

from evolalloc.core.composition import allocation_adapter  # the rule's home: exporters read it too, without torch
from evolalloc.runtime.adaptive import Adapted, get_adapter
from evolalloc.runtime.scorers import Scorer, get_scorer

__all__ = ["allocation_adapter", "scorer_for_allocation"]


def scorer_for_allocation(allocation) -> Scorer:
    """``allocation``'s scorer, ``Adapted`` when it names an adapter; ``ValueError`` (an unknown scorer or
    adapter, or an adapter that cannot read that scorer's scores)."""
    scorer = get_scorer(allocation.scorer, **allocation.scorer_params)
    adapter = allocation_adapter(allocation)
    if adapter is None:
        return scorer
    return Adapted(scorer, get_adapter(adapter[0], **adapter[1]))
