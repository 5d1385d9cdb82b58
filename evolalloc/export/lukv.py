"""``lukv``: budget curves in the exact layout kvpress's ``LUKVPress`` loads (kvpress >= 0.5.4).

``LUKVPress`` holds a float32 array ``[99, num_layers, num_kv_heads]`` of per-head *prune
ratios* (fractions of the prompt removed). At a global ``compression_ratio`` r it reads row
``round(100 r) - 1`` and, in each layer, keeps ``(1 - ratio) * seq_len`` tokens per head (the
layer's total rounded, floors, then the largest fractional parts get the remainder, at least 1
per head) among the top scores of its inner ``ScorerPress``, plus its ``sink`` first and ``window``
last tokens. Row ``i`` is written for the average budget ``c_i = n (1 - (i + 1) / 100)`` of a prompt
of ``context_length`` ``n``:

- with ``curves`` (the run's ``lukv-curves.npz``): LU-KV's own hull greedy at each ``c_i``
  (``UtilityCurves.budgets``), the method's whole budget curve;
- with ``family`` (a ``budget.curve`` run's ``profile-curve.json``): that run's searched curve at
  each ``c_i`` (``ProfileCurve.family``, capped at ``n``, monotone per unit across the 99 rows;
  rows beyond its grid listed in ``outside_curve``);
- without either: the profile carried to each ``c_i`` by EvolKV's proportional rule, capped at ``n``
  (``export/curve.py``'s family; rows below the profile's target were not searched).

Each ratio is nudged down by float32 steps until LUKVPress's own arithmetic,
``floor((1 - ratio) * n)`` in float32, gives the budget exactly, so at ``context_length`` kvpress
keeps the same number of tokens per (layer, KV head) as evolalloc (a test replays kvpress's
rule; ``benchmarks/lukv_agreement.sh`` checks it end to end). The JSON sidecar names the press
to wrap (``press``, as for ``--format kvpress``) with ``sink = window = 0``: evolalloc's scorers
keep their own always-kept tokens inside the budget. Loading it, from a local file (kvpress
only downloads curves it knows by model name)::

    import json, numpy as np
    from kvpress import LUKVPress, SnapKVPress

    meta = json.load(open("allocation-c128.lukv.json"))
    press = LUKVPress(SnapKVPress(**meta["press"]["kwargs"]), compression_ratio=0.75, **meta["lukv"])
    press._budget_curves = np.load("allocation-c128.lukv.npy")   # before the first forward
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from evolalloc.core.allocation import Allocation
from evolalloc.core.baselines.lukv import UtilityCurves
from evolalloc.core.errors import UserError
from evolalloc.export import register_exporter
from evolalloc.export.base import Exporter, Rendered
from evolalloc.export.curve import LUKV_ROWS, family_sidecar, load_family, profile_family
from evolalloc.export.kvpress import kvpress_press
from evolalloc.export.npy_file import checked_context_length, npy_with_sidecar, source_fields

LUKV_FORMAT = "evolalloc.lukv"


def lukv_targets(context_length: int) -> list[float]:
    """The average budget of each of LUKVPress's 99 rows for a prompt of ``context_length`` tokens."""
    return [context_length * (1 - (i + 1) / 100) for i in range(LUKV_ROWS)]


def greedy_family(curves: UtilityCurves, num_units: int, targets, cap: int) -> np.ndarray:
    """int64 ``[len(targets), layers, kv_heads]``: LU-KV's greedy at each target, no unit above ``cap``.

    Curves shorter than ``cap`` are extended flat (keeping more than the longest profiled prompt
    adds nothing); a target below the curves' floor lowers the floor to what it can hold.
    """
    utility = curves.utility
    if utility.shape[2] - 1 < cap:
        utility = np.pad(utility, ((0, 0), (0, 0), (0, cap + 1 - utility.shape[2])), mode="edge")
    shaped = UtilityCurves(utility[:, :, : cap + 1], floor=min(curves.floor, cap), meta=curves.meta)
    rows = []
    for target in targets:
        total = round(target * num_units)
        floor = min(shaped.floor, total // num_units)
        rows.append(UtilityCurves(shaped.utility, floor, shaped.meta).budgets(total))
    return np.stack(rows).astype(np.int64)


def prune_ratios(budgets: np.ndarray, context_length: int) -> np.ndarray:
    """float32 prune ratios (same shape) with which LUKVPress keeps exactly ``min(b, n)`` tokens of ``n``.

    LUKVPress computes ``(1 - ratio) * n`` in float32 and floors it: ``1 - b / n`` can land just
    below ``b`` (then it would keep ``b - 1`` and hand the remainder to another head), so such
    ratios step down one float32 at a time until the product reaches ``b``.
    """
    n = np.float32(context_length)
    keep = np.minimum(np.asarray(budgets), context_length).astype(np.float32)
    ratios = (1 - keep / n).astype(np.float32)
    for _ in range(64):
        low = (np.float32(1) - ratios) * n < keep
        if not low.any():
            return np.maximum(ratios, np.float32(0))
        ratios[low] = np.nextafter(ratios[low], np.float32(-1))
    raise AssertionError("prune ratios did not converge")  # a float32 step is ~1e-7: never after a few


@register_exporter("lukv",
                   description="kvpress LUKVPress budget curves [99, layers, kv_heads] prune ratios (.npy + JSON)")
class LukvExporter(Exporter):
    suffix = ".npy"

    def __init__(self, context_length: int | None = None, curves: str | Path | None = None,
                 family: str | Path | None = None):
        if context_length is None:
            raise UserError("LUKVPress's curves are fractions of a prompt: give its length with --context-length",
                            field="context_length")
        self.context_length = checked_context_length(context_length)
        self.curves_path = curves
        self.curves = UtilityCurves.load(curves) if curves is not None else None
        if curves is not None and family is not None:
            raise UserError("give either LU-KV's utility curves (--curves) "
                            "or a searched profile curve (--family), not both",
                            field="family")
        self.family = family

    def render(self, allocation: Allocation) -> Rendered:
        n = self.context_length
        targets = lukv_targets(n)
        g = allocation.geometry
        if self.curves is not None:
            if self.curves.utility.shape[:2] != (g.num_layers, g.num_kv_heads):
                raise UserError(f"curves for {self.curves.utility.shape[:2]} (layers, KV heads), the profile has "
                                f"{(g.num_layers, g.num_kv_heads)}", source=str(self.curves_path), field="utility")
            budgets = greedy_family(self.curves, g.num_layers * g.num_kv_heads, targets, cap=n)
            rule = "LU-KV hull greedy on the utility curves at each row's budget"
        elif self.family is not None:
            family = load_family(self.family, allocation)
            budgets = family.family(targets, cap=n)
            rule = None  # family_sidecar says it
        else:
            budgets = profile_family(allocation, targets, cap=n)
            rule = ("EvolKV proportional rule from the profile at c = "
                    f"{allocation.target:g}, capped at {n} tokens per unit")
        array = prune_ratios(budgets, n)
        sidecar = {
            "format": LUKV_FORMAT,
            "version": 1,
            "shape": list(array.shape),
            "values": "prune_ratios",
            "compression_ratios": [(i + 1) / 100 for i in range(LUKV_ROWS)],
            "targets": targets,
            "context_length": n,
            "rule": rule,
            "press": kvpress_press(allocation),
            "lukv": {"sink": 0, "window": 0},  # the scorer's always-kept tokens are inside each budget
            **source_fields(allocation),
            "method": allocation.provenance.get("method"),
            "source_target": allocation.target,
            "below_source_target": [] if self.curves is not None else [t for t in targets if t < allocation.target],
        }
        if self.family is not None:
            sidecar.update(family_sidecar(family, targets))
        return npy_with_sidecar(array, sidecar)
