"""``headkv``: per-(layer, KV head) capacities as a plain JSON table.

For head-granularity profiles (each KV head of a layer has its own budget, as in HeadKV), the
table a head-level eviction needs: ``capacities[layer][kv_head]`` tokens kept. A layer profile
exports too (its heads are equal), and says ``granularity: "layer"``. The table round-trips:
``allocation_from_headkv`` rebuilds the allocation. Loading it::

    import json
    import numpy as np

    table = json.load(open("allocation-c128.headkv.json"))
    capacities = np.array(table["capacities"])   # [num_layers, num_kv_heads] tokens kept
    assert capacities.shape == (table["num_layers"], table["num_kv_heads"])
    # with evolalloc itself: evolalloc.generate(model, tokenizer, prompts, capacities, scorer=table["scorer"])
"""

from __future__ import annotations

import json

import numpy as np

from evolalloc.core.allocation import Allocation
from evolalloc.core.geometry import ModelGeometry
from evolalloc.export import register_exporter
from evolalloc.export.base import Exporter, Rendered

HEADKV_FORMAT = "evolalloc.headkv"


def headkv_table(allocation: Allocation) -> dict:
    """The JSON-ready table."""
    return {
        "format": HEADKV_FORMAT,
        "version": 1,
        "model": allocation.model,
        "geometry": allocation.geometry.to_dict(),
        "num_layers": allocation.geometry.num_layers,
        "num_kv_heads": allocation.geometry.num_kv_heads,
        "granularity": allocation.granularity,
        "scorer": allocation.scorer,
        "scorer_params": allocation.scorer_params,
        "target": allocation.target,
        "total": allocation.total,
        "capacities": allocation.budgets.tolist(),
        "method": allocation.provenance.get("method"),
        "scorer_checkpoint": allocation.provenance.get("scorer_checkpoint"),  # a trained scorer's fingerprint
    }


def allocation_from_headkv(table: dict) -> Allocation:
    """Rebuild the allocation a ``headkv`` table was exported from (provenance: method, and a trained
    scorer's checkpoint fingerprint when it had one)."""
    provenance = {"method": table["method"]}
    if table.get("scorer_checkpoint"):
        provenance["scorer_checkpoint"] = table["scorer_checkpoint"]
    return Allocation(model=table["model"], geometry=ModelGeometry(**table["geometry"]), scorer=table["scorer"],
                      scorer_params=table["scorer_params"], target=table["target"], granularity=table["granularity"],
                      budgets=np.array(table["capacities"], dtype=np.int64), provenance=provenance)


@register_exporter("headkv", description="per-(layer, KV head) capacities as JSON")
class HeadkvExporter(Exporter):
    suffix = ".headkv.json"

    def render(self, allocation: Allocation) -> Rendered:
        return Rendered(json.dumps(headkv_table(allocation), indent=2) + "\n", self.suffix)
