"""Compatibility names for the first export module (the formats now live one per module)."""

from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import allocation_to_json
from evolalloc.export import exporters
from evolalloc.export.base import export_allocation, export_text
from evolalloc.export.kvpress import KVPRESS_FORMAT, compression_ratios, export_kvpress


def export_json(allocation: Allocation) -> str:
    """The allocation file itself (``evolalloc.core.allocation``), as the runtime loads it."""
    return allocation_to_json(allocation)


FORMATS = tuple(exporters.names())

__all__ = ["FORMATS", "KVPRESS_FORMAT", "compression_ratios", "export_allocation", "export_json", "export_kvpress", "export_text"]
