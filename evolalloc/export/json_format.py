"""``json``: the allocation file itself, exactly what ``evolalloc.core.allocation_file`` loads.

Loading it::

    from evolalloc.core.allocation_file import load_allocation
    profile = load_allocation("allocation-c128.json")
    profile.budgets  # int64 [num_layers, num_kv_heads]
"""

from __future__ import annotations

from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import allocation_to_json
from evolalloc.export import register_exporter
from evolalloc.export.base import Exporter, Rendered


@register_exporter("json", description="evolalloc's allocation JSON (round-trips)")
class JsonExporter(Exporter):
    suffix = ".json"
    static = False  # the allocation file itself: it keeps the method and adapter the runtime applies
    holds_decode = True  # and its decode section

    def render(self, allocation: Allocation) -> Rendered:
        return Rendered(allocation_to_json(allocation), self.suffix)
