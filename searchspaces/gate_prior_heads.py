"""The hybrid per KV head (``gate_prior_heads``): one searched offset per (layer, KV head) on the
gates' scores, the same encoding and adapter as ``gate_prior`` (see that module), at head
granularity: units are ``(layer, kv_head)`` pairs, layer-major, in contiguous groups of ``n_g``."""

from __future__ import annotations

from searchspaces.gate_prior import ADAPTER, SCORER
from searchspaces.head_groups import HeadGroups
from searchspaces.registry import register_search_space


@register_search_space("gate_prior_heads")
class GatePriorHeads(HeadGroups):
    """One searched offset per (layer, KV head); every candidate keeps ``c * L * H`` entries."""

    adapter = ADAPTER
    scorers = (SCORER,)

    def __init__(self, **kwargs):
        kwargs["exact_total"] = True  # the budgets' sum is what the global top-k keeps
        super().__init__(**kwargs)
