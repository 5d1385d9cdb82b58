"""An allocation: one KV-cache budget per (layer, KV head), and where it came from.

This is what a search produces and what the eviction runtime loads. In memory the budgets are
an int64 array ``[num_layers, num_kv_heads]``; on disk they are nested lists inside a versioned
JSON document (see ``allocation_file`` and ``schema/allocation.schema.json``).

Budget arithmetic lives here too, as a pure function on arrays: ``complete_budgets``, EvolKV
§3.2 completion, scale to an exact total. The baselines (uniform, pyramid, streaming) are
allocation rules in ``evolalloc.core.baselines``, one file each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import numpy as np

from evolalloc import __version__
from evolalloc.core.baselines import methods
from evolalloc.core.geometry import ModelGeometry

FORMAT = "evolalloc.allocation"
FORMAT_VERSION = 1
GRANULARITIES = ("layer", "head")


# -- budget arithmetic ---------------------------------------------------------------------


def complete_budgets(units: np.ndarray, total: int, floor: int = 1) -> np.ndarray:
    """Scale non-negative integer budgets ``[n]`` to sum to exactly ``total``; returns int64 ``[n]``.

    EvolKV §3.2: with ``A = sum(k)``, ``b_i = ceil(k_i + k_i / A * (T - A)) = ceil(k_i * T / A)``.
    The ceilings overshoot ``T`` by fewer than ``n``; that excess is taken back one token at a
    time from the largest budgets among those that were rounded up, so every ``b_i`` stays in
    ``{floor(k_i T / A), ceil(k_i T / A)}``. That choice is what makes expansion monotone: for
    ``T >= A`` no unit ends below its old budget and the order of units is kept.

    Ties (equal budgets) give back first from the unit whose exact share was furthest from its
    ceiling, then from the lower index, so the result is deterministic.

    ``floor`` is respected: units whose share falls below it are raised to it, and what that
    costs is then taken from the largest budgets (water-filling from the top), never pushing one
    below ``floor``. All arithmetic is on integers, so there is no float rounding drift.

    Raises ``ValueError`` if ``total < floor * n`` (no way to honour both).
    """
    k = np.asarray(units)
    if k.ndim != 1 or k.size == 0:
        raise ValueError(f"expected a non-empty 1-D budget vector, got shape {k.shape}")
    if not np.all(np.equal(np.mod(k, 1), 0)) or np.any(k < 0):
        raise ValueError("budgets must be non-negative integers")
    k = k.astype(np.int64)
    n, total, floor = k.size, int(total), int(floor)
    if floor < 0:
        raise ValueError(f"floor must be >= 0, got {floor}")
    if total < floor * n:
        raise ValueError(f"a total of {total} cannot give {n} units at least {floor} each")
    if k.sum() == 0:
        k = np.ones(n, dtype=np.int64)  # no shares to scale: treat as uniform
    current = int(k.sum())

    scaled = k * total
    lower, remainder = scaled // current, scaled % current
    upper = lower + (remainder > 0)
    budgets = np.maximum(upper, floor)
    excess = int(budgets.sum()) - total

    # 1) Undo roundings up, largest budgets first, never below floor(k_i T / A) or the floor.
    can_give = (remainder > 0) & (lower >= floor)
    candidates = np.flatnonzero(can_give)
    order = np.lexsort((candidates, remainder[candidates], -budgets[candidates]))
    taken = candidates[order[:excess]]
    budgets[taken] -= 1
    excess -= taken.size

    # 2) Only the floor can leave an excess now: lower the tallest budgets level by level.
    while excess > 0:
        top = int(budgets.max())
        at_top = np.flatnonzero(budgets == top)
        below = budgets[budgets < top]
        level = max(int(below.max()) if below.size else floor, floor)
        room = (top - level) * at_top.size
        if room <= excess:
            budgets[at_top] = level
            excess -= room
            continue
        whole, extra = divmod(excess, at_top.size)
        budgets[at_top] -= whole
        ties = at_top[np.lexsort((at_top, remainder[at_top]))]
        budgets[ties[:extra]] -= 1
        excess = 0
    return budgets


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# -- the allocation ------------------------------------------------------------------------


@dataclass(eq=False, kw_only=True)
class Allocation:
    """Budgets ``[num_layers, num_kv_heads]`` for one model, scorer and target average ``c``.

    ``granularity == "layer"`` means every KV head of a layer has the same budget (EvolKV);
    ``"head"`` lets them differ. ``provenance`` is free-form but always holds ``method``
    (``evolved`` or a registered baseline, see ``evolalloc.core.baselines.methods()``), ``evolalloc_version`` and ``created_at``; a search adds task, fitness,
    task_score, cache_score, lam, gamma, group_size, population, sigma0, seed, evaluations,
    optimizer and optimizer_version.
    """

    model: str
    geometry: ModelGeometry
    scorer: str = "snapkv"
    scorer_params: dict = field(default_factory=dict)
    target: float
    granularity: str = "layer"
    budgets: np.ndarray
    provenance: dict = field(default_factory=dict)

    def __post_init__(self):
        budgets = np.asarray(self.budgets)
        expected = (self.geometry.num_layers, self.geometry.num_kv_heads)
        if budgets.shape != expected:
            raise ValueError(f"budgets must have shape {expected} (layers, KV heads), got {budgets.shape}")
        if budgets.size and (not np.all(np.equal(np.mod(budgets, 1), 0)) or np.any(budgets < 0)):
            raise ValueError("budgets must be non-negative integers")
        self.budgets = budgets.astype(np.int64)
        if not (isinstance(self.target, (int, float)) and math.isfinite(self.target) and self.target > 0):
            raise ValueError(f"target must be a positive number, got {self.target!r}")
        self.target = float(self.target)
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"granularity must be one of {GRANULARITIES}, got {self.granularity!r}")
        if self.granularity == "layer" and np.any(self.budgets != self.budgets[:, :1]):
            raise ValueError("granularity 'layer' needs the same budget for every KV head of a layer")
        if not self.model or not self.scorer:
            raise ValueError("model and scorer must be non-empty names")
        self.scorer_params = dict(self.scorer_params)
        self.provenance = dict(self.provenance)
        known = methods()
        if self.provenance.get("method") not in known:
            raise ValueError(f"provenance['method'] must be one of {known}, got {self.provenance.get('method')!r}")
        self.provenance.setdefault("evolalloc_version", __version__)
        self.provenance.setdefault("created_at", _now())

    # -- sizes ---------------------------------------------------------------------------

    @property
    def total(self) -> int:
        """Sum of all budgets (tokens over every layer and KV head)."""
        return int(self.budgets.sum())

    @property
    def mean_budget(self) -> float:
        """``k_mean``: mean budget per (layer, KV head), what CacheScore compares with ``c``."""
        return float(self.budgets.mean())

    @property
    def target_total(self) -> int:
        """The total ``complete()`` reaches: ``c * L * H``, rounded to a whole token.

        For layer granularity the rounding is per layer vector (``round(c * L) * H``) so every
        head of a layer can keep the same budget.
        """
        layers, heads = self.budgets.shape
        if self.granularity == "layer":
            return round(self.target * layers) * heads
        return round(self.target * layers * heads)

    @property
    def bytes(self) -> int:
        """Bytes the kept keys and values occupy if each (layer, head) stores exactly its budget."""
        return self.total * self.geometry.bytes_per_token_per_head

    @property
    def padded_bytes(self) -> int:
        """Bytes of a padded cache: each layer holds its largest head budget for every head.

        That is what a per-layer cache tensor ``[heads, max_budget, head_dim]`` really takes.
        """
        per_layer = self.budgets.max(axis=1) * self.budgets.shape[1]
        return int(per_layer.sum()) * self.geometry.bytes_per_token_per_head

    # -- completion and expansion --------------------------------------------------------

    def _rescaled(self, target: float, min_budget: int) -> np.ndarray:
        layers, heads = self.budgets.shape
        if self.granularity == "layer":
            per_layer = complete_budgets(self.budgets[:, 0], round(target * layers), min_budget)
            return np.repeat(per_layer[:, None], heads, axis=1)
        flat = complete_budgets(self.budgets.reshape(-1), round(target * layers * heads), min_budget)
        return flat.reshape(layers, heads)

    def complete(self, min_budget: int = 1) -> Allocation:
        """A copy whose total is exactly ``target_total`` (EvolKV §3.2), no unit below ``min_budget``."""
        provenance = dict(self.provenance, completed_from_total=self.total)
        return replace(self, budgets=self._rescaled(self.target, min_budget), provenance=provenance)

    def expand(self, target: float, min_budget: int = 1) -> Allocation:
        """This profile carried to a new target ``c'`` by the same proportional rule, no search.

        For ``c' >= c`` no budget decreases. Scores in ``provenance`` still describe the search
        at the old target, recorded as ``expanded_from_target``.
        """
        if not (math.isfinite(target) and target > 0):
            raise ValueError(f"target must be a positive number, got {target!r}")
        provenance = dict(self.provenance, expanded_from_target=self.target)
        return replace(self, target=float(target), budgets=self._rescaled(target, min_budget), provenance=provenance)
