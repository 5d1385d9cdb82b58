"""The floors blend's space (``floors_under_global_topk``, once ``gate_floors``): searched per-layer
floors under the global top-k of the retention gates' scores.

The ``global-topk`` method keeps, per input, the top ``c * L * H`` (layer, head, token) entries by the
retention gates' calibrated scores. Below the budget where that ranking is good for every head, its one
global top-k can starve a head of the few tokens the answer needs. The blend gives every head a
static floor first: head ``(l, h)`` keeps its best ``max(min_budget, floor(floor_fraction * b[l, h]))``
entries, and the rest of the total ``sum(b)`` goes by the one global top-k
(adapter ``floors_under_global_topk``). ``floor_fraction`` 1.0 is the static budgets ``b``;
0.0 is the ``global`` adapter (plain ``global-topk``).

What is searched: the budgets ``b``, decoded as in ``layer_groups`` and always completed to exactly
``c * L`` per head (so every candidate keeps ``c * L * H`` entries, as the shipped profile will).
Their total is the number kept; each layer's share sets its heads' floors. ``floor_fraction`` is a
recipe setting (``search_space.floor_fraction``), not searched: it travels into the profile's
``provenance.adapter_params``.
"""

from __future__ import annotations

import math

from searchspaces.layer_groups import LayerGroups
from searchspaces.registry import register_search_space

#: The budget adapter (``evolalloc.runtime.adaptive``) that reads these budgets as floors + a total.
ADAPTER = "floors_under_global_topk"
#: The scorer whose scores the global top-k compares: only the retention gates' are on one scale across
#: layers (``evolalloc.core.scorer_names``; a recipe may say its old name, ``gates``).
SCORER = "retention-gates"
#: The share of each head's budget it keeps as a floor when the recipe names none.
DEFAULT_FLOOR_FRACTION = 0.5


def check_floor_fraction(value) -> float:
    """``value`` as a float in ``[0, 1]``, or ``ValueError`` saying what is wrong."""
    if isinstance(value, bool) or not isinstance(value,
                                                 (int, float)) or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"floor_fraction must be a number in [0, 1], got {value!r}")
    return float(value)


@register_search_space("floors_under_global_topk")
class FloorsUnderGlobalTopK(LayerGroups):
    """One searched budget per layer: its heads' floors under the global top-k of ``c * L * H``."""

    adapter = ADAPTER
    scorers = (SCORER,)
    params = ("floor_fraction",)

    def __init__(self, *, floor_fraction: float = DEFAULT_FLOOR_FRACTION, **kwargs):
        # Always the exact total: the budgets' sum is what the global top-k keeps.
        kwargs["exact_total"] = True
        super().__init__(**kwargs)
        self.floor_fraction = check_floor_fraction(floor_fraction)  # recorded as the adapter's (base.adapter_params)
