"""How a CMA-ES vector of budget *ratios* maps to integer budgets and back.

A search space works on plain arrays. A *unit* is what gets one searched number: a layer
(``layer_groups``) or a (layer, KV head) pair (``head_groups``). The optimizer sees ratios
``k_i / c`` (so sigma0 = 0.3 and the start point 1.0 mean the same thing at any target ``c``),
the evaluator sees integer budgets of shape ``[num_layers, num_kv_heads]``.
"""

from __future__ import annotations

import math

import numpy as np

from searchspaces.completion import NO_CAP, complete_budgets

# Why 4.0: CMA-ES starts at 1.0 with sigma0 = 0.3, so 4.0 is ten sigmas out and never cuts a
# normal step short, while it stops one unit from soaking up the whole cache (CacheScore already
# falls to 0 once the *mean* reaches 2c, but a single unit can still run away while the others
# shrink). A unit above max_budget (e.g. the prompt length) decodes the same as max_budget, so
# the upper bound is also capped there: searching ratios that all decode alike is wasted volume.
DEFAULT_MAX_RATIO = 4.0
# What one searched budget covers: a whole layer (all its KV heads alike) or one KV head.
GRANULARITIES = ("layer", "head")
# Units per group (n_g); the recipe schema takes this range from here.
GROUP_SIZE_RANGE = {"min": 1}


class SearchSpace:
    """Base class: ratios ``[n_units]`` <-> budgets ``[num_layers, num_kv_heads]`` (int64).

    Subclasses set ``granularity`` ("layer": every KV head of a layer shares its budget; "head")
    and implement ``n_units``, ``_to_grid`` and ``_from_grid``; the registry sets ``name``.

    Attributes:
        target: ``c``, the target average budget per (layer, KV head).
        group_size: ``n_g``, units per contiguous group optimised together (EvolKV: 8).
        ratio_bounds: ``(lower, upper)`` bounds on ``k_i / c`` for the optimizer.
        min_budget: no unit decodes below this (e.g. the scorer's always-kept tokens).
        max_budget: no unit decodes above this (``None``: no cap).
        layer_caps: per layer the most tokens a budget can usefully give it (a sliding-window
            layer's ``W - 1``), or ``None``. A layer capped at or below ``c`` is *pinned* at its
            cap: the window decides it, so it is in no group and CMA-ES spends no dimension on
            it; a layer capped above ``c`` is searched with its cap as its upper bound. The total
            stays ``c`` per unit: what a pinned layer cannot hold goes to the others (exact rule).
            Only spaces whose units are layers or (layer, head) pairs take caps.
        exact_total: complete every decoded candidate to exactly ``round(c * n_units)`` tokens
            (EvolKV §3.2's completion rule, applied before evaluation instead of only to the
            best profile at the end), so every candidate costs the memory the shipped profile
            will. ``False`` (EvolKV): a candidate may over- or underspend and the objective's
            CacheScore judges that.
    """

    name: str = ""
    granularity: str = ""
    #: A budget adapter (``evolalloc.runtime.adaptive``) that reads the decoded budgets per input
    #: (the hybrid's ``score_prior``), or ``None``: the budgets are the kept tokens per unit.
    adapter: str | None = None
    #: The scorers this space's budgets mean something for (``None``: any scorer).
    scorers: tuple[str, ...] | None = None
    #: The space's own settings (recipe ``search_space.<name>``) its ``__init__`` takes.
    params: tuple[str, ...] = ()
    #: Whether ``_from_grid`` maps a per-layer grid onto units (layers, heads), so caps apply.
    takes_layer_caps: bool = False

    @property
    def adapter_params(self) -> dict:
        """The ``adapter``'s parameters a profile of this space records (``provenance.adapter_params``):
        the space's own settings (``params``), which are its adapter's (``floors_under_global_topk``'
        ``floor_fraction``)."""
        return {name: getattr(self, name) for name in self.params} if self.adapter else {}

    def __init__(
        self,
        *,
        num_layers: int,
        num_kv_heads: int,
        target: float,
        group_size: int = 8,
        ratio_bounds: tuple[float, float] | None = None,
        min_budget: int = 1,
        max_budget: int | None = None,
        exact_total: bool = False,
        layer_caps=None,
    ):
        if num_layers < 1 or num_kv_heads < 1:
            raise ValueError(f"num_layers and num_kv_heads must be >= 1, got {num_layers} x {num_kv_heads}")
        if not (math.isfinite(target) and target > 0):
            raise ValueError(f"target must be a positive number, got {target!r}")
        if group_size < GROUP_SIZE_RANGE["min"]:
            raise ValueError(f"group_size must be >= {GROUP_SIZE_RANGE['min']}, got {group_size}")
        if min_budget < 0:
            raise ValueError(f"min_budget must be >= 0, got {min_budget}")
        if max_budget is not None and max_budget < max(min_budget, 1):
            raise ValueError(f"max_budget ({max_budget}) must be >= min_budget ({min_budget}) and >= 1")
        if min_budget > target:
            raise ValueError(f"min_budget ({min_budget}) is above the target average budget ({target})")
        if max_budget is not None and max_budget < target:
            raise ValueError(f"max_budget ({max_budget}) is below the target average budget ({target})")
        self.num_layers = int(num_layers)
        self.num_kv_heads = int(num_kv_heads)
        self.target = float(target)
        self.group_size = int(group_size)
        self.min_budget = int(min_budget)
        self.max_budget = None if max_budget is None else int(max_budget)
        self.ratio_bounds = self._resolve_bounds(ratio_bounds)
        self.exact_total = bool(exact_total)
        self.unit_caps = self._resolve_caps(layer_caps)

    def _resolve_caps(self, layer_caps) -> np.ndarray | None:
        """``[n_units]`` int64 caps (a huge number where none), or ``None`` when no layer is capped."""
        if layer_caps is None or all(cap is None for cap in layer_caps):
            return None
        if len(layer_caps) != self.num_layers:
            raise ValueError(f"layer_caps has {len(layer_caps)} entries, expected {self.num_layers}")
        if not self.takes_layer_caps:
            raise ValueError(f"search space {self.name!r} cannot take a model with sliding-window layers yet; "
                             "use layer_groups or head_groups")
        grid = np.repeat(np.array([NO_CAP if c is None else int(c) for c in layer_caps], dtype=np.int64)[:, None],
                         self.num_kv_heads, axis=1)
        caps = np.round(self._from_grid(grid.astype(np.float64))).astype(np.int64)
        return np.minimum(caps, NO_CAP)

    @property
    def pinned_units(self) -> np.ndarray:
        """Indices of the units whose cap is at or below ``c``: held at their cap, never searched."""
        if self.unit_caps is None:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(self.unit_caps <= self.target)

    def _resolve_bounds(self, bounds: tuple[float, float] | None) -> tuple[float, float]:
        if bounds is None:
            # The lower bound decodes to exactly min_budget: below it every ratio clips alike.
            lower = self.min_budget / self.target
            upper = DEFAULT_MAX_RATIO
            if self.max_budget is not None:
                upper = min(upper, self.max_budget / self.target)
            bounds = (lower, upper)
        lower, upper = (float(b) for b in bounds)
        if not (0.0 <= lower < upper):
            raise ValueError(f"ratio_bounds must satisfy 0 <= lower < upper, got {bounds}")
        # The search starts at uniform (all 1.0); pycma refuses a start point outside its bounds.
        if not (lower <= 1.0 <= upper):
            raise ValueError(f"ratio_bounds {bounds} must contain 1.0 (the uniform start)")
        return (lower, upper)

    # -- geometry of the unit vector -------------------------------------------------------

    @property
    def n_units(self) -> int:
        raise NotImplementedError

    def _to_grid(self, values: np.ndarray) -> np.ndarray:
        """``[n_units]`` -> ``[num_layers, num_kv_heads]`` (same dtype)."""
        raise NotImplementedError

    def _from_grid(self, grid: np.ndarray) -> np.ndarray:
        """``[num_layers, num_kv_heads]`` -> ``[n_units]`` (float)."""
        raise NotImplementedError

    # -- public API --------------------------------------------------------------------------

    def groups(self) -> list[np.ndarray]:
        """Unit indices of each contiguous group, bottom-up (layer 0 first).

        ``ceil(n_units / group_size)`` int64 arrays; the last one may be smaller. Pinned units
        (``layer_caps``) are in none.
        """
        searched = np.setdiff1d(np.arange(self.n_units, dtype=np.int64), self.pinned_units)
        return [searched[start : start + self.group_size] for start in range(0, searched.size, self.group_size)]

    def initial_ratios(self) -> np.ndarray:
        """``[n_units]`` float64, all 1.0: every unit at the target ``c`` (uniform)."""
        return np.ones(self.n_units, dtype=np.float64)

    def decode(self, ratios: np.ndarray) -> np.ndarray:
        """Ratios ``[n_units]`` -> int64 budgets ``[num_layers, num_kv_heads]``.

        Ratios are clipped to ``ratio_bounds`` (so any optimizer back-end, bounded or not, maps
        to the same space), budgets are ``round(ratio * c)`` (halves round up) clipped to
        ``[min_budget, max_budget]``, then, under ``exact_total``, completed to
        ``total_budget`` (which may move a unit past ``max_budget``'s clip by the rescaling).
        """
        ratios = np.asarray(ratios, dtype=np.float64)
        if ratios.shape != (self.n_units,):
            raise ValueError(f"{self.name}: expected ratios of shape ({self.n_units},), got {ratios.shape}")
        if not np.all(np.isfinite(ratios)):
            raise ValueError(f"{self.name}: ratios must be finite, got {ratios}")
        clipped = np.clip(ratios, *self.ratio_bounds)
        budgets = np.floor(clipped * self.target + 0.5).astype(np.int64)
        budgets = np.clip(budgets, self.min_budget, self.max_budget)
        if self.unit_caps is not None:
            budgets = np.minimum(budgets, self.unit_caps)
            budgets[self.pinned_units] = self.unit_caps[self.pinned_units]
        if self.exact_total:
            # Proportional, as the final completion; units keep their order and the floor. Pinned
            # units stay at their caps; the others share the rest of the total.
            free = np.ones(self.n_units, dtype=bool)
            free[self.pinned_units] = False
            caps = None if self.unit_caps is None else self.unit_caps[free]
            rest = self.total_budget - int(budgets[~free].sum())
            budgets[free] = complete_budgets(budgets[free], rest, floor=self.min_budget, caps=caps)
        return self._to_grid(budgets).astype(np.int64)

    @property
    def total_budget(self) -> int:
        """Tokens over all units at the target: ``round(c * n_units)``."""
        return round(self.target * self.n_units)

    def encode(self, budgets: np.ndarray) -> np.ndarray:
        """Budgets ``[num_layers, num_kv_heads]`` -> ratios ``[n_units]`` (float64, ``k / c``).

        Used to seed a search from an existing profile; not clipped to the bounds.
        """
        budgets = np.asarray(budgets)
        expected = (self.num_layers, self.num_kv_heads)
        if budgets.shape != expected:
            raise ValueError(f"{self.name}: expected budgets of shape {expected}, got {budgets.shape}")
        return self._from_grid(budgets.astype(np.float64)) / self.target

    def held(self, budgets: np.ndarray) -> np.ndarray:
        """``budgets`` ``[num_layers, num_kv_heads]`` as this space can hold them (``decode(encode(b))``):
        a per-head profile in a per-layer space becomes its layer means, the bounds, caps and floor
        apply and the exact rule completes the total. How a search starts from, or compares with, a
        profile it did not make (an unsearched method at ``c``)."""
        return self.decode(self.encode(budgets))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, layers={self.num_layers}, kv_heads={self.num_kv_heads}, "
            f"target={self.target:g}, group_size={self.group_size}, ratio_bounds={self.ratio_bounds}, "
            f"min_budget={self.min_budget}, max_budget={self.max_budget})"
        )
