"""The hybrid per KV head (``score_prior_heads``, once ``gate_prior_heads``): one searched offset per
(layer, KV head) on the retention gates' scores, the same encoding and adapter as ``score_prior``
(see that module), at head granularity: units are ``(layer, kv_head)`` pairs, layer-major, in
contiguous groups of ``n_g``."""

from __future__ import annotations

from searchspaces.head_groups import HeadGroups
from searchspaces.registry import register_search_space
from searchspaces.score_prior import ADAPTER, SCORER


@register_search_space("score_prior_heads")
class ScorePriorHeads(HeadGroups):
    """One searched offset per (layer, KV head); every candidate keeps ``c * L * H`` entries."""

    adapter = ADAPTER
    scorers = (SCORER,)

    def __init__(self, **kwargs):
        kwargs["exact_total"] = True  # the budgets' sum is what the global top-k keeps
        super().__init__(**kwargs)
