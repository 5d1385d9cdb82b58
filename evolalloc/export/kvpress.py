"""``kvpress``: the profile as kvpress (NVIDIA's library of KV-cache "presses") sets budgets.

kvpress sets a budget as a *compression ratio*, the fraction of a layer's prompt tokens that is
**removed**, and keeps ``max(1, int(n * (1 - ratio)))`` of ``n`` tokens (``compute_n_kept`` in
kvpress 0.5.5). Its per-layer wrapper takes one ratio per layer, indexed by ``layer_idx``.
Loading the export (kvpress 0.5.5, whose ``pipeline`` feeds the question after compressing the
context, like evolalloc's ``question_after_compression``)::

    import json
    from kvpress import PerLayerCompressionPress, SnapKVPress

    profile = json.load(open("allocation-c128.kvpress.json"))
    snap = SnapKVPress(**profile["press"]["kwargs"])   # window_size / kernel_size of the search
    press = PerLayerCompressionPress(press=snap, compression_ratios=profile["compression_ratios"])
    # ratios for a prompt of another length n, from the budgets (tokens kept per layer); the
    # half token makes kvpress's int(n * (1 - r)) land on b exactly despite float rounding:
    n = 1024
    ratios = [0.0 if b >= n else 1 - (b + 0.5) / n for b in profile["budgets"]]

An allocation is a number of tokens kept, so ratios hold for one prompt length only
(``context_length``); the budgets are exported too. ``compression_ratios`` are chosen so that
kvpress keeps exactly ``b`` tokens at ``context_length`` (checked by a test against kvpress's
rule, and end to end by ``benchmarks/kvpress_agreement.sh``).

``press`` names the kvpress press with the search's scorer settings and says whether it is
*exactly* evolalloc's scorer: SnapKV matches kvpress's ``SnapKVPress`` when evolalloc's
``snapkv`` runs with ``pooling="avg"`` and ``pool_window=False`` (kvpress averages pooled scores
over the prompt before the window only); with the defaults (max pooling, kernel 7) it is close,
not exact. kvpress has no per-head press with explicit budgets; for head granularity
``head_budgets`` (``[num_layers][num_kv_heads]``) carries the full profile and the per-layer lists
use each layer's mean over its heads.
"""

from __future__ import annotations

import json

import numpy as np

from evolalloc.core.allocation import Allocation
from evolalloc.core.errors import UserError
from evolalloc.export import register_exporter
from evolalloc.export.base import Exporter, Rendered

KVPRESS_FORMAT = "evolalloc.kvpress"


def _check_length(context_length) -> None:
    if not (isinstance(context_length, (int, np.integer)) and not isinstance(context_length, bool)
            and context_length > 0):
        raise ValueError(f"context_length must be a positive integer, got {context_length!r}")


def compression_ratios(layer_budgets, context_length: int) -> list[float]:
    """kvpress ratios (fraction removed) that keep exactly ``b`` of ``context_length`` tokens.

    kvpress keeps ``int(n * (1 - r))`` tokens; ``1 - b / n`` can round to just below ``b``
    (``1000 * (1 - 0.8) = 199.99...``), so the ratio is nudged down by one float step at a time
    until kvpress's own formula gives ``b``. A budget at or above ``n`` removes nothing (0.0).
    """
    _check_length(context_length)
    n = int(context_length)
    ratios = []
    for budget in np.asarray(layer_budgets, dtype=float):
        kept = min(float(budget), n)
        if kept >= n:
            ratios.append(0.0)
            continue
        ratio = 1.0 - kept / n
        while int(n * (1 - ratio)) < int(np.floor(kept)):
            ratio = float(np.nextafter(ratio, 0.0))
        ratios.append(float(ratio))
    return ratios


def kvpress_press(allocation: Allocation) -> dict:
    """The kvpress press that scores tokens like the profile's scorer, and whether it is exact."""
    params = allocation.scorer_params
    if allocation.scorer == "snapkv":
        window, kernel = params.get("window", 32), params.get("kernel", 7)
        differences = []
        if params.get("pooling", "max") != "avg":
            differences.append("evolalloc pools SnapKV votes with max, kvpress with avg (set pooling: avg)")
        if params.get("pool_window", True):
            differences.append("evolalloc pools over the window's votes too, kvpress "
                               "over the prefix only (set pool_window: false)")
        return {"class": "SnapKVPress", "kwargs": {"window_size": window, "kernel_size": kernel},
                "exact": not differences, "differences": differences}
    if allocation.scorer == "streaming":
        return {"class": "StreamingLLMPress", "kwargs": {"n_sink": params.get("sinks", 4)}, "exact": True,
                "differences": []}
    if allocation.scorer == "knorm":
        return {"class": "KnormPress", "kwargs": {}, "exact": True, "differences": []}
    return {"class": None, "kwargs": {}, "exact": False,
            "differences": [f"kvpress has no press for evolalloc's scorer {allocation.scorer!r}; pick one yourself"]}


def export_kvpress(allocation: Allocation, context_length: int | None = None) -> dict:
    """A plain dict (JSON-ready) with the profile in kvpress terms.

    Keys: ``budgets`` (tokens kept per layer, head mean for head granularity), ``num_layers``,
    ``target``, ``scorer``, ``granularity``, ``press``, ``context_length`` and
    ``compression_ratios`` (one per layer, only when ``context_length`` is given), and
    ``head_budgets`` (only for head granularity).
    """
    per_layer = allocation.capped_budgets().mean(axis=1)  # a sliding layer holds at most its window - 1
    budgets = [int(b) if float(b).is_integer() else round(float(b), 3) for b in per_layer]
    document = {
        "format": KVPRESS_FORMAT,
        "version": 1,
        "model": allocation.model,
        "method": allocation.provenance.get("method"),
        "scorer": allocation.scorer,
        "scorer_params": allocation.scorer_params,
        # A trained scorer's weights (gates, learned): the profile is only reproduced with this file.
        "scorer_checkpoint": allocation.provenance.get("scorer_checkpoint"),
        "press": kvpress_press(allocation),
        "granularity": allocation.granularity,
        "target": allocation.target,
        "num_layers": allocation.geometry.num_layers,
        "num_kv_heads": allocation.geometry.num_kv_heads,
        "budgets": budgets,
        "context_length": context_length,
        "compression_ratios": None if context_length is None else compression_ratios(per_layer, context_length),
    }
    if allocation.granularity == "head":
        document["head_budgets"] = allocation.capped_budgets().tolist()
    if allocation.geometry.windows is not None:
        document["sliding_windows"] = list(allocation.geometry.windows)  # the model's own, per layer (null: full)
    return document


@register_exporter("kvpress", description="kvpress PerLayerCompressionPress ratios and budgets")
class KvpressExporter(Exporter):
    suffix = ".kvpress.json"

    def __init__(self, context_length: int | None = None):
        if context_length is not None:
            try:
                _check_length(context_length)
            except ValueError as err:
                raise UserError(str(err), field="context_length") from None
        self.context_length = context_length

    def render(self, allocation: Allocation) -> Rendered:
        return Rendered(json.dumps(export_kvpress(allocation, self.context_length), indent=2) + "\n", self.suffix)
