"""``curve``: a family of profiles over budgets, ``[n_budgets, layers, kv_heads]`` (.npy + JSON).

One search gives a profile at one average budget ``c``; EvolKV's expansion rule carries it to
any other ``c'`` without a new search (``Allocation.expand``). This format writes that family
as one array, the layout of kvpress's LU-KV budget curves (``LUKVPress`` loads a
``[99, num_layers, num_kv_heads]`` array of per-head prune ratios, row ``i`` for a global
compression ratio of ``(i + 1) / 100``):

- without ``context_length``: int64 token budgets, one row per target in ``targets``
  (default: the profile's own target, then 2x and 4x); the profile's own target row is the
  profile itself, the others its expansions;
- with ``context_length`` ``n`` and no ``targets``: the LU-KV grid, float32 prune ratios
  ``1 - b / n``, row ``i`` the expansion to ``c = n * (1 - (i + 1) / 100)``. No unit can keep more
  than the ``n`` prompt tokens, so the expansion is capped at ``n``: units that would exceed it
  keep ``n`` and the rest of the total is shared by the others by the same proportional rule
  (so every row keeps exactly its global fraction of the prompt).

Rows below the profile's own target shrink it by the same rule; they were not searched (the
sidecar lists them in ``below_source_target``). With ``family`` (a ``budget.curve`` run's
``profile-curve.json``) every row comes from that run's searched curve instead
(``ProfileCurve.family``: its rows at its grid budgets, its rule between them; the default
targets are its grid); rows beyond the grid are listed in ``outside_curve``. The JSON sidecar
(same name, ``.json``) says which: ``values`` ("budgets" or "prune_ratios"), ``targets``,
``compression_ratios`` (LU-KV rows), ``context_length``, the model geometry and
the scorer. Loading it::

    import json
    import numpy as np

    curve = np.load("profile-curve.npy")               # [n_budgets, layers, kv_heads]
    meta = json.load(open("profile-curve.json"))
    row = meta["targets"].index(256.0)                  # the budgets of the c=256 member
    budgets = curve[row]                                # evolalloc.generate(..., allocation=budgets)
"""

from __future__ import annotations

import numpy as np

from evolalloc.core.allocation import Allocation, complete_budgets
from evolalloc.core.curve import RULE, ProfileCurve
from evolalloc.core.errors import UserError
from evolalloc.export import register_exporter
from evolalloc.export.base import Exporter, Rendered
from evolalloc.export.npy_file import checked_context_length, npy_with_sidecar, source_fields

CURVE_FORMAT = "evolalloc.curve"
LUKV_ROWS = 99


def capped_expansion(allocation: Allocation, target: float, cap: int) -> np.ndarray:
    """``[layers, kv_heads]``: the profile expanded to ``target``, no unit above ``cap``.

    Units the proportional rule would push past ``cap`` are fixed at ``cap``; the remaining total
    is shared by the other units by the same rule (EvolKV completion), until none exceeds it.
    """
    layers, heads = allocation.budgets.shape
    per_layer = allocation.granularity == "layer"
    units = allocation.budgets[:, 0] if per_layer else allocation.budgets.reshape(-1)
    total = round(target * layers) if per_layer else round(target * layers * heads)
    if total >= cap * units.size:
        out = np.full(units.size, cap, dtype=np.int64)
    else:
        capped = np.zeros(units.size, dtype=bool)
        while True:
            out = np.full(units.size, cap, dtype=np.int64)
            out[~capped] = complete_budgets(units[~capped], total - cap * int(capped.sum()), floor=1)
            over = out > cap
            if not over.any():
                break
            capped |= over
    return np.repeat(out[:, None], heads, axis=1) if per_layer else out.reshape(layers, heads)


def load_family(path, allocation: Allocation) -> ProfileCurve:
    """The profile curve at ``path``, checked to describe ``allocation``'s model geometry and scorer."""
    curve = ProfileCurve.load(path)
    if curve.meta.get("geometry") != allocation.geometry.to_dict():
        raise UserError(f"the curve is for geometry {curve.meta.get('geometry')}, the profile for "
                        f"{allocation.geometry.to_dict()}", source=str(path), field="geometry")
    if curve.meta.get("scorer") != allocation.scorer:
        raise UserError(f"the curve ranks with {curve.meta.get('scorer')!r}, the profile with {allocation.scorer!r}",
                        source=str(path), field="scorer")
    return curve


def family_sidecar(curve: ProfileCurve, targets) -> dict:
    """What a sidecar says of rows drawn from a searched curve."""
    return {"rule": f"the run's profile curve: {RULE}", "anchors": curve.anchors, "curve_budgets": curve.budgets,
            "outside_curve": curve.outside(targets), "below_source_target": []}


def profile_family(allocation: Allocation, targets, cap: int | None = None) -> np.ndarray:
    """int64 ``[len(targets), layers, kv_heads]``: the profile at its own target, expansions elsewhere."""
    rows = []
    for target in map(float, targets):
        if cap is not None:
            rows.append(capped_expansion(allocation, target, cap))
        else:
            rows.append(allocation.budgets if target == allocation.target else allocation.rescale(target).budgets)
    return np.stack(rows).astype(np.int64)


@register_exporter("curve", description="profile family over budgets [n_budgets, layers, kv_heads] (.npy + JSON)")
class CurveExporter(Exporter):
    suffix = ".npy"

    def __init__(self, targets: list[float] | None = None, context_length: int | None = None,
                 family: str | None = None):
        if targets is not None and (not targets or any(not (float(t) > 0) for t in targets)):
            raise UserError(f"targets must be positive numbers, got {targets!r}", field="targets")
        self.targets = None if targets is None else [float(t) for t in targets]
        self.context_length = None if context_length is None else checked_context_length(context_length)
        self.family = family

    def render(self, allocation: Allocation) -> Rendered:
        n = self.context_length
        compression = None
        if self.targets is None and n is not None:
            compression = [(i + 1) / 100 for i in range(LUKV_ROWS)]
            targets = [n * (1 - r) for r in compression]
        else:
            targets = self.targets or [allocation.target, 2 * allocation.target, 4 * allocation.target]
        curve = load_family(self.family, allocation) if self.family is not None else None
        if curve is not None and self.targets is None and n is None:
            targets = curve.budgets
        budgets = profile_family(allocation, targets, cap=n) if curve is None else curve.family(targets, cap=n)
        if n is None:
            array, values = budgets, "budgets"
        else:
            array, values = (1.0 - budgets / n).astype(np.float32), "prune_ratios"
        sidecar = {
            "format": CURVE_FORMAT,
            "version": 1,
            "shape": list(array.shape),
            "values": values,
            "targets": targets,
            "compression_ratios": compression,
            "context_length": n,
            "rule": "EvolKV proportional expansion of the profile" + (f", capped at {n} tokens per unit" if n else ""),
            **source_fields(allocation),
            "granularity": allocation.granularity,
            "source_target": allocation.target,
            # `evolalloc expand` only carries a profile upwards; a curve also shrinks it by the same
            # rule (LU-KV's grid needs every ratio). Those rows were not searched:
            "below_source_target": [t for t in targets if t < allocation.target],
            "method": allocation.provenance.get("method"),
            "scorer_checkpoint": allocation.provenance.get("scorer_checkpoint"),  # a trained scorer's fingerprint
        }
        if curve is not None:
            sidecar.update(family_sidecar(curve, targets))
        return npy_with_sidecar(array, sidecar)
