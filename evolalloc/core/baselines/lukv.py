"""LU-KV (Tang et al., ICML 2026, arXiv:2602.08585; kvpress's ``LUKVPress``): per-(layer, KV head)
budgets from offline utility curves, for any total, by a greedy on their convex hulls.

Each unit ``u = (layer, KV head)`` has a utility curve ``U_u(b)``: what the unit still delivers
when it keeps ``b`` tokens (evolalloc's definition and its profiling are in
``evolalloc/pipeline/lukv.py``; this file only needs the numbers). Allocating a total ``T`` is
``max sum_u U_u(b_u)`` subject to ``sum_u b_u = T``, ``floor <= b_u <= B``: a knapsack with
non-concave items. LU-KV relaxes each curve to its upper concave envelope (the convex hull from
above), whose marginal gains only fall, and then the greedy that always gives the next token to
the unit with the largest marginal gain is exact for the relaxed problem; where a curve is
already concave it is exact for the real one (``tests/core/test_lukv.py`` checks both by brute force).

The greedy is done segment by segment (a hull segment has one slope), so it costs
``O(units * B log)`` whatever ``T`` is, and one set of curves gives the allocation at every total.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evolalloc.core.baselines import register_baseline
from evolalloc.core.baselines.base import Baseline
from evolalloc.core.errors import UserError

#: The run folder's file holding the profiled curves (``UtilityCurves.save``).
CURVES_FILE = "lukv-curves.npz"


@dataclass
class UtilityCurves:
    """Utility curves of every (layer, KV head), as profiled on a task's search split.

    ``utility``: float64 ``[num_layers, num_kv_heads, B + 1]``, ``utility[l, h, b]`` = the unit's
    utility when it keeps ``b`` tokens (non-decreasing in ``b``; ``B`` = the longest profiled prompt,
    beyond which keeping more changes nothing). ``floor``: the tokens every unit keeps anyway (the
    scorer's always-kept tokens): budgets below it are impossible, so the hull starts there.
    ``meta``: what was profiled (scorer, task, split, instances, the utility's definition).
    """

    utility: np.ndarray
    floor: int = 1
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.utility = np.asarray(self.utility, dtype=np.float64)
        if self.utility.ndim != 3 or self.utility.shape[2] < 2:
            raise ValueError("utility curves must be [layers, kv_heads, B + "
                             f"1] with B >= 1, got shape {self.utility.shape}")
        if not np.all(np.isfinite(self.utility)):
            raise ValueError("utility curves hold a non-finite value")
        if not 0 <= self.floor <= self.max_budget:
            raise ValueError(f"floor {self.floor} is outside the curves' budgets 0..{self.max_budget}")

    @property
    def max_budget(self) -> int:
        return self.utility.shape[2] - 1

    def budgets(self, total: int) -> np.ndarray:
        """int64 ``[num_layers, num_kv_heads]`` summing to ``total``: the hull greedy (``greedy_budgets``)."""
        return greedy_budgets(self.utility.reshape(-1, self.utility.shape[2]), total,
                              self.floor).reshape(self.utility.shape[:2])

    def save(self, path: str | Path) -> Path:
        from evolalloc.core.fileio import write_atomic

        buffer = io.BytesIO()
        np.savez(buffer, utility=self.utility, floor=np.int64(self.floor),
                 meta=np.array(json.dumps(self.meta, sort_keys=True)))
        return write_atomic(Path(path), buffer.getvalue())

    @staticmethod
    def load(path: str | Path) -> "UtilityCurves":
        """Read a curves file; a damaged or foreign one is a ``UserError`` naming the file and the field."""
        where = str(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except (OSError, ValueError) as err:
            raise UserError(f"not a LU-KV curves file ({err})", source=where) from None
        for name in ("utility", "floor", "meta"):
            if name not in arrays:
                raise UserError("missing from the LU-KV curves file", source=where, field=name)
        try:
            meta = json.loads(str(arrays["meta"]))
        except ValueError:
            raise UserError("is not JSON", source=where, field="meta") from None
        try:
            return UtilityCurves(arrays["utility"], int(arrays["floor"]), meta)
        except (TypeError, ValueError) as err:
            raise UserError(str(err), source=where, field="utility") from None


def upper_hull(curve: np.ndarray, start: int = 0) -> np.ndarray:
    """Budgets (int64, increasing) of the vertices of ``curve[start:]``'s upper concave envelope.

    ``curve``: ``[B + 1]``, the utility at each budget. The envelope is the piecewise-linear
    function through these vertices; between two of them the curve lies on or below it.
    Collinear points are dropped, so consecutive segments have strictly falling slopes.
    """
    vertices: list[int] = []
    for b in range(start, len(curve)):
        # Pop the last vertex while it lies on or under the chord from the one before it to b.
        while len(vertices) >= 2:
            a, m = vertices[-2], vertices[-1]
            if (curve[m] - curve[a]) * (b - a) <= (curve[b] - curve[a]) * (m - a):
                vertices.pop()
            else:
                break
        vertices.append(b)
    return np.array(vertices, dtype=np.int64)


def greedy_budgets(curves: np.ndarray, total: int, floor: int = 0) -> np.ndarray:
    """Budgets int64 ``[units]`` summing to ``total``, maximising ``sum_u hull_u(b_u)``.

    ``curves``: ``[units, B + 1]``. Every unit starts at ``floor``; the remaining tokens go, one
    hull segment at a time, to the steepest segment left (ties: the lower unit, then the lower
    budget); the last segment taken may be taken in part. The hull's slopes fall along each unit,
    so its segments are taken in order, and this is the marginal-utility greedy, token by token.
    """
    curves = np.asarray(curves, dtype=np.float64)
    units, top = curves.shape[0], curves.shape[1] - 1
    total = int(total)
    if not 0 <= floor <= top:
        raise ValueError(f"floor {floor} is outside the curves' budgets 0..{top}")
    if not units * floor <= total <= units * top:
        raise ValueError(f"a total of {total} tokens over {units} units "
                         f"needs {units * floor} <= total <= {units * top} "
                         f"(each unit keeps between {floor} and {top})")
    budgets = np.full(units, floor, dtype=np.int64)
    segments = []  # (-slope, unit, start, length)
    for unit in range(units):
        vertices = upper_hull(curves[unit], floor)
        for a, b in zip(vertices[:-1], vertices[1:]):
            slope = (curves[unit, b] - curves[unit, a]) / (b - a)
            segments.append((-slope, unit, int(a), int(b - a)))
    segments.sort()
    left = total - units * floor
    for _, unit, _, length in segments:
        if left == 0:
            break
        step = min(length, left)
        budgets[unit] += step
        left -= step
    return budgets


@register_baseline("lukv")
@dataclass
class LUKV(Baseline):
    """Needs ``curves`` (profiled by the run: ``Experiment.baseline`` passes them). Head granularity:
    LU-KV allocates per KV head. The target's total ``c * L * H`` is split by ``greedy_budgets``."""

    granularity = "head"
    default = False  # it profiles the search split first: a run asks for it by name
    profiled = True  # Experiment.baseline builds it with the run's UtilityCurves
    curves: UtilityCurves | None = None

    def budgets(self, geometry, target, *, reserved=0, granularity="head"):
        if self.curves is None:
            raise ValueError("method 'lukv' needs utility curves profiled on the search split; evolalloc profiles "
                             "them within a run (recipe baselines, compare, or evaluate)")
        shape = (geometry.num_layers, geometry.num_kv_heads)
        if self.curves.utility.shape[:2] != shape:
            raise ValueError(f"the LU-KV curves are for {self.curves.utility.shape[:2]} "
                             f"(layers, KV heads), the model has {shape}")
        total = round(float(target) * shape[0] * shape[1])
        budgets = self.curves.budgets(total)
        if granularity == "layer":
            raise ValueError("method 'lukv' allocates per KV head; it has no layer-granularity form")
        return budgets

    def provenance(self, *, reserved=0):
        meta = self.curves.meta if self.curves is not None else {}
        return {"curves": CURVES_FILE, "utility": meta.get("utility"), "profiled_on": meta.get("split"),
                "instances": meta.get("instances"), "floor": self.curves.floor if self.curves is not None else None}
