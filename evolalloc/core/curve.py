"""A profile curve: one budget profile per average budget, monotone per unit (``budget.curve``).

A run with ``budget.curve`` searches a few *anchor* budgets and derives the rest of a grid from
them (``pipeline/curve.py``). This module is the family itself, free of search and torch:

- ``curve_grid``: the grid, ``points`` budgets spaced geometrically from ``low * c`` to ``high * c``
  (rounded to whole tokens; ``c`` itself always on it);
- ``bounded_completion``: spread an exact integer total over units proportionally to weights,
  each unit held inside ``[lo, hi]``. Every anchor search decodes its candidates through it with
  the neighbouring anchor as ``lo`` or ``hi``, so anchors nest by construction;
- ``ProfileCurve``: the grid's rows ``[n_budgets, layers, kv_heads]``, which are anchors and which
  were derived, and ``family(targets)``, the profile at any budget, saved as ``profile-curve.json``.

The rule for a budget ``t`` between two rows ``P_lo`` (at ``a``) and ``P_hi`` (at ``b``) is per-unit
linear interpolation, ``P_lo + (t - a) / (b - a) * (P_hi - P_lo)``, whose mean is exactly ``t``,
then rounded to the exact total with every unit held between the previous row and ``P_hi``.
So no unit ever loses tokens as the budget grows, and every row sums to exactly ``t * units``.
Outside the grid (LU-KV's 99 ratios reach further) the nearest end row is scaled by the same
bounded rule and such rows are listed as not searched.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evolalloc.core.allocation import Allocation
from evolalloc.core.errors import UserError
from evolalloc.core.fileio import write_atomic
from evolalloc.core.geometry import ModelGeometry

CURVE_FILE = "profile-curve.json"
CURVE_FORMAT = "evolalloc.profile_curve"
ANCHOR, DERIVED = "anchor", "derived"
RULE = ("anchors searched (each decoded inside its neighbour: no unit below the anchor under it, none above the "
        "anchor over it); budgets between anchors per-unit linear interpolation, rounded to the exact total "
        "between the previous row and the next anchor")


def curve_grid(target: int, low: float, high: float, points: int) -> list[int]:
    """``points`` budgets geometric from ``low * target`` to ``high * target``, rounded, with ``target``."""
    ends = (math.log(low * target), math.log(high * target))
    grid = {max(1, round(math.exp(ends[0] + (ends[1] - ends[0]) * i / (points - 1)))) for i in range(points)}
    return sorted(grid | {int(target)})


def bounded_completion(weights, total: int, lo, hi) -> np.ndarray:
    """int64 ``[n]`` summing to ``total`` with ``lo <= b <= hi``, proportional to ``weights`` where the bounds allow.

    Water-filling: the scale ``s`` with ``sum(clip(s * w, lo, hi)) == total`` (by bisection; the sum
    grows with ``s``), then floors plus one token for the largest fractional parts. A unit of
    weight 0 still gets a tiny weight, so a total above ``sum(lo)`` can always be reached.
    ``ValueError`` when ``sum(lo) <= total <= sum(hi)`` does not hold.
    """
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    w = np.maximum(np.asarray(weights, dtype=np.float64), 1e-6)
    if np.any(lo > hi) or not (lo.sum() <= total <= hi.sum()):
        raise ValueError(f"no budgets between the bounds sum to {total} (bounds sum to {lo.sum()}..{hi.sum()})")
    lo_s, hi_s = 0.0, 1.0
    while np.clip(hi_s * w, lo, hi).sum() < total:
        hi_s *= 2
    for _ in range(200):
        mid = (lo_s + hi_s) / 2
        if np.clip(mid * w, lo, hi).sum() < total:
            lo_s = mid
        else:
            hi_s = mid
    x = np.clip(lo_s * w, lo, hi)  # sum <= total
    out = np.floor(x).astype(np.int64)
    frac = x - out
    while out.sum() < total:  # the remainder, largest fractional parts first, never above hi
        room = np.flatnonzero(out < hi)
        order = room[np.argsort(-frac[room], kind="stable")]
        give = order[: total - out.sum()]
        out[give] += 1
        frac[give] = -1.0
    return out


def _units(budgets: np.ndarray, granularity: str) -> np.ndarray:
    return budgets[:, 0] if granularity == "layer" else budgets.reshape(-1)


def _budgets(units: np.ndarray, granularity: str, shape: tuple[int, int]) -> np.ndarray:
    if granularity == "layer":
        return np.repeat(units[:, None], shape[1], axis=1)
    return units.reshape(shape)


def unit_total(target: float, granularity: str, shape: tuple[int, int]) -> int:
    """The total of the units' budgets at average ``target`` (per layer for layer granularity)."""
    return round(target * shape[0]) if granularity == "layer" else round(target * shape[0] * shape[1])


def bounded_budgets(budgets: np.ndarray, target: float, granularity: str, lo, hi) -> np.ndarray:
    """``[L, H]`` budgets of average exactly ``target``, shaped like ``budgets``, each unit inside
    ``[lo, hi]`` (``[L, H]`` arrays or scalars): what an anchor search really evaluates."""
    budgets = np.asarray(budgets)
    shape = budgets.shape
    lo_u = _units(np.broadcast_to(np.asarray(lo, dtype=np.int64), shape), granularity)
    hi_u = _units(np.broadcast_to(np.asarray(hi, dtype=np.int64), shape), granularity)
    units = bounded_completion(_units(budgets, granularity), unit_total(target, granularity, shape), lo_u, hi_u)
    return _budgets(units, granularity, shape)


@dataclass
class ProfileCurve:
    """Rows ``[n_budgets, layers, kv_heads]`` at ``budgets`` (ascending), monotone per unit.

    ``roles[i]`` is ``"anchor"`` (searched) or ``"derived"`` (interpolated by ``RULE``);
    ``meta`` carries the model, geometry, scorer and granularity of the profiles.
    """

    budgets: list[float]
    rows: np.ndarray
    roles: list[str]
    granularity: str
    min_budget: int = 1
    meta: dict = field(default_factory=dict)

    @classmethod
    def from_anchors(cls, anchors: dict[float, Allocation], grid, min_budget: int = 1) -> "ProfileCurve":
        """The curve through ``anchors`` (nested profiles) at every budget of ``grid`` (which holds them)."""
        keys = sorted(map(float, anchors))
        grid = sorted(map(float, grid))
        if keys[0] != grid[0] or keys[-1] != grid[-1] or not set(keys) <= set(grid):
            raise ValueError(f"anchors {keys} must lie on the grid {grid} and include both of its ends")
        first = anchors[keys[0]]
        rows, prev = [], None
        for t in grid:
            if t in anchors:
                row = anchors[t].budgets
            else:
                a = max(k for k in keys if k < t)
                b = min(k for k in keys if k > t)
                pa, pb = anchors[a].budgets, anchors[b].budgets
                x = pa + (t - a) / (b - a) * (pb - pa)
                row = bounded_budgets(x, t, first.granularity, np.maximum(pa, prev), pb)
            if prev is not None and np.any(row < prev):
                raise ValueError("the profiles are not nested: a unit loses "
                                 f"tokens from c={grid[len(rows) - 1]:g} to {t:g}")
            rows.append(row)
            prev = row
        meta = {"model": first.model, "geometry": first.geometry.to_dict(), "scorer": first.scorer,
                "scorer_params": first.scorer_params, "task": first.provenance.get("task")}
        return cls(budgets=grid, rows=np.stack(rows).astype(np.int64),
                   roles=[ANCHOR if t in anchors else DERIVED for t in grid],
                   granularity=first.granularity, min_budget=min_budget, meta=meta)

    @property
    def anchors(self) -> list[float]:
        return [t for t, role in zip(self.budgets, self.roles) if role == ANCHOR]

    def row(self, target: float) -> np.ndarray:
        return self.rows[self.budgets.index(float(target))]

    def family(self, targets, cap: int | None = None) -> np.ndarray:
        """int64 ``[len(targets), L, H]``: the profile at each target, monotone per unit across them.

        A grid budget gives its row (unless ``cap``, the most a unit may keep, e.g. the prompt length,
        cuts it); between grid rows the curve's rule; below or above the grid the end row scaled by
        the bounded rule (not searched: ``outside(targets)``). Built in ascending order, each
        target's row bounded below by the previous one, so the family is monotone whatever is asked.
        """
        shape = self.rows.shape[1:]
        targets = [float(t) for t in targets]
        out: dict[float, np.ndarray] = {}
        prev = np.zeros(shape, dtype=np.int64)
        n_units = self.rows[0].size if self.granularity == "head" else shape[0]
        big = np.iinfo(np.int64).max // (2 * self.rows[0].size)
        for t in sorted(set(targets)):
            top = np.full(shape, big if cap is None else cap, dtype=np.int64)
            if t in self.budgets:
                x, hi = self.row(t), top
            elif t < self.budgets[0]:
                x, hi = self.rows[0] * (t / self.budgets[0]), np.minimum(self.rows[0], top)
            elif t > self.budgets[-1]:
                x, hi = self.rows[-1] * (t / self.budgets[-1]), top
            else:
                i = int(np.searchsorted(self.budgets, t))
                a, b = self.budgets[i - 1], self.budgets[i]
                x = self.rows[i - 1] + (t - a) / (b - a) * (self.rows[i] - self.rows[i - 1])
                hi = np.minimum(self.rows[i], top)
            total = unit_total(t, self.granularity, shape)
            if total > _units(hi, self.granularity).sum():  # the next row, cut at cap, is too small: cap binds
                hi = top
            # The scorer's floor as far as the total can hold it on top of the previous row (LU-KV's
            # tiniest rows cannot hold it at all).
            floor = min(self.min_budget, total // n_units)
            while floor > 0 and _units(np.maximum(prev, floor), self.granularity).sum() > total:
                floor -= 1
            lo = np.minimum(np.maximum(prev, floor), hi)
            if total >= _units(hi, self.granularity).sum():  # every unit at the cap (the prompt length): keep it all
                row = hi
            elif t in self.budgets and np.all(self.row(t) <= hi) and np.all(self.row(t) >= lo):
                row = self.row(t)
            else:
                row = bounded_budgets(x, t, self.granularity, lo, hi)
            out[t] = prev = row
        return np.stack([out[t] for t in targets]).astype(np.int64)

    def outside(self, targets) -> list[float]:
        """The targets the curve does not cover (derived from an end row, not from anchors on both sides)."""
        return [float(t) for t in targets if not (self.budgets[0] <= float(t) <= self.budgets[-1])]

    # -- file ----------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {"format": CURVE_FORMAT, "version": 1, "rule": RULE, "budgets": self.budgets, "roles": self.roles,
                "anchors": self.anchors, "granularity": self.granularity, "min_budget": self.min_budget,
                **self.meta, "rows": self.rows.tolist()}

    def save(self, path: str | Path) -> Path:
        write_atomic(Path(path), json.dumps(self.to_dict(), indent=1) + "\n")
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> "ProfileCurve":
        """Read a ``profile-curve.json`` (``UserError`` naming the file and field on a bad one)."""
        where = str(path)
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise UserError(f"cannot read a profile curve: {err}", source=where) from None
        if not isinstance(data, dict) or data.get("format") != CURVE_FORMAT:
            raise UserError(f"not a profile curve (format {CURVE_FORMAT!r} expected)", source=where, field="format")
        try:
            rows = np.asarray(data["rows"], dtype=np.int64)
            budgets = [float(b) for b in data["budgets"]]
            geometry = ModelGeometry(**data["geometry"])
        except (KeyError, TypeError, ValueError) as err:
            raise UserError(f"bad profile curve: {err}", source=where, field="rows") from None
        expected = (len(budgets), geometry.num_layers, geometry.num_kv_heads)
        if rows.shape != expected:
            raise UserError(f"rows have shape {rows.shape}, expected {expected} (budgets, layers, KV heads)",
                            source=where, field="rows")
        if np.any(np.diff(rows, axis=0) < 0) or budgets != sorted(budgets):
            raise UserError("rows are not monotone per unit over ascending budgets", source=where, field="rows")
        meta = {k: data.get(k) for k in ("model", "geometry", "scorer", "scorer_params", "task")}
        return cls(budgets=budgets, rows=rows, roles=list(data.get("roles", [])),
                   granularity=data.get("granularity", "layer"),
                   min_budget=int(data.get("min_budget", 1)), meta=meta)
