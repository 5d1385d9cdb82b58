"""Export a budget profile for other tools: our own JSON, or a table a kvpress user can load.

kvpress (NVIDIA's library of KV-cache "presses") sets budgets as *compression ratios*: the
fraction of a layer's prompt tokens that is **removed**. Its per-layer wrapper takes one ratio
per layer, indexed by ``layer_idx``::

    import json
    from kvpress import PerLayerCompressionPress, SnapKVPress

    profile = json.load(open("allocation-c128.kvpress.json"))
    press = PerLayerCompressionPress(press=SnapKVPress(), compression_ratios=profile["compression_ratios"])
    # or, for a prompt of another length n, from the budgets (tokens kept per layer):
    ratios = [max(0.0, 1 - b / n) for b in profile["budgets"]]

An allocation is a number of tokens kept, not a fraction, so the ratios hold for one prompt
length only: ``context_length`` (say, the length the profile was searched at). The budgets are
exported too, so a caller can recompute ratios for its own lengths. kvpress has no per-head
budget press; for head granularity ``head_budgets`` (``[num_layers][num_kv_heads]``) carries the
full profile and the per-layer lists use each layer's mean over its heads.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import numpy as np

from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import allocation_to_json
from evolalloc.core.errors import UserError

FORMATS = ("json", "kvpress")
KVPRESS_FORMAT = "evolalloc.kvpress"


def compression_ratios(layer_budgets, context_length: int) -> list[float]:
    """kvpress ratios (fraction removed) for tokens kept per layer at a prompt of ``context_length``.

    A budget at or above the prompt length removes nothing (ratio 0.0), never a negative ratio.
    """
    if not (isinstance(context_length, (int, np.integer)) and context_length > 0):
        raise ValueError(f"context_length must be a positive integer, got {context_length!r}")
    kept = np.minimum(np.asarray(layer_budgets, dtype=float), context_length)
    return [round(float(r), 6) for r in 1.0 - kept / context_length]


def export_kvpress(allocation: Allocation, context_length: int | None = None) -> dict:
    """A plain dict (JSON-ready) with the profile in kvpress terms.

    Keys: ``budgets`` (tokens kept per layer, head mean for head granularity), ``num_layers``,
    ``target``, ``scorer``, ``granularity``, ``context_length`` and ``compression_ratios`` (one
    per layer, only when ``context_length`` is given), and ``head_budgets`` (only for head
    granularity). See the module docstring for loading it into ``PerLayerCompressionPress``.
    """
    per_layer = allocation.budgets.mean(axis=1)
    budgets = [int(b) if float(b).is_integer() else round(float(b), 3) for b in per_layer]
    document = {
        "format": KVPRESS_FORMAT,
        "version": 1,
        "model": allocation.model,
        "method": allocation.provenance.get("method"),
        "scorer": allocation.scorer,
        "granularity": allocation.granularity,
        "target": allocation.target,
        "num_layers": allocation.geometry.num_layers,
        "num_kv_heads": allocation.geometry.num_kv_heads,
        "budgets": budgets,
        "context_length": context_length,
        "compression_ratios": None if context_length is None else compression_ratios(per_layer, context_length),
    }
    if allocation.granularity == "head":
        document["head_budgets"] = allocation.budgets.tolist()
    return document


def export_json(allocation: Allocation) -> str:
    """The allocation file itself (``evolalloc.core.allocation``), as the runtime loads it."""
    return allocation_to_json(allocation)


def export_text(allocation: Allocation, fmt: str, *, context_length: int | None = None) -> str:
    """The exported document as text in format ``fmt`` (one of ``FORMATS``)."""
    if fmt not in FORMATS:
        close = difflib.get_close_matches(fmt, FORMATS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UserError(f"unknown export format {fmt!r}{hint}; choose one of {', '.join(FORMATS)}", field="format")
    if fmt == "json":
        return export_json(allocation)
    try:
        return json.dumps(export_kvpress(allocation, context_length), indent=2) + "\n"
    except ValueError as err:
        raise UserError(str(err), field="context_length") from None


def export_allocation(allocation: Allocation, fmt: str, path: str | Path, *, context_length: int | None = None) -> Path:
    """Write ``export_text(...)`` to ``path`` atomically; returns the path."""
    from evolalloc.core.fileio import write_atomic

    text = export_text(allocation, fmt, context_length=context_length)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, text)
