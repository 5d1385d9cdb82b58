"""An allocation: one KV-cache budget per (layer, KV head), and where it came from.

This is what a search produces and what the eviction runtime loads. In memory the budgets are
an int64 array ``[num_layers, num_kv_heads]``; on disk they are nested lists inside a versioned
JSON document (see ``allocation_file`` and ``schema/allocation.schema.json``).

Completion (EvolKV §3.2, scale to an exact total) is ``complete_budgets``, a pure function on
arrays kept in ``searchspaces.completion`` because the search's exact budget rule uses it too.
The baselines (uniform, pyramid, streaming) are allocation rules in ``evolalloc.core.baselines``,
one file each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import numpy as np

from evolalloc import __version__
from evolalloc.core.composition import is_method, methods
from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.core.geometry import ModelGeometry
from evolalloc.core.topup import TOPUP, TOPUP_HALF, TOPUP_RULES, topup_provenance
from searchspaces.completion import NO_CAP, complete_budgets

__all__ = ["Allocation", "complete_budgets", "FORMAT", "FORMAT_VERSION", "GRANULARITIES"]

FORMAT = "evolalloc.allocation"
EXPANSION_RULES = ("proportional", "additive", TOPUP, TOPUP_HALF)  # how expand() carries a profile to a new budget
# Version 2 adds ``geometry.windows`` (sliding-window layers); version 3 adds ``decode`` (budgets held
# while decoding). A file is written at the lowest version that holds what it says, so a prompt-only
# profile of a full-attention model is still version 1 and reads in older evolalloc too.
FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
GRANULARITIES = ("layer", "head")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# -- the allocation ------------------------------------------------------------------------


def unit_caps(geometry: ModelGeometry, granularity: str) -> np.ndarray | None:
    """Caps of the completion's units (``[layers]`` or ``[layers * heads]``): a sliding layer's
    ``W - 1`` (``ModelGeometry.caps``), a huge number elsewhere; ``None`` when no layer slides."""
    if geometry.windows is None:
        return None
    per_layer = np.array([NO_CAP if c is None else c for c in geometry.caps()], dtype=np.int64)
    return per_layer if granularity == "layer" else np.repeat(per_layer, geometry.num_kv_heads)


def fit_to_windows(budgets: np.ndarray, geometry: ModelGeometry, granularity: str) -> np.ndarray:
    """``[L, H]`` budgets with every sliding layer held to its window cap and what it cannot hold
    given to the other layers in proportion (the total is kept): every method at a budget ``c``
    then spends the same real memory. Unchanged for a model without sliding layers."""
    caps = unit_caps(geometry, granularity)
    if caps is None:
        return budgets
    budgets = np.asarray(budgets, dtype=np.int64)
    heads = budgets.shape[1]
    units = budgets[:, 0] if granularity == "layer" else budgets.reshape(-1)
    out = complete_budgets(units, int(units.sum()), 0, caps=caps)
    return np.repeat(out[:, None], heads, axis=1) if granularity == "layer" else out.reshape(budgets.shape)


# The largest total a profile may have: budgets are int64, and a float total above 2**53 is no
# longer exact (``?budget=1e17`` once wrapped around to budgets of 1).
MAX_TOTAL = 2**53


@dataclass(eq=False, kw_only=True)
class Allocation:
    """Budgets ``[num_layers, num_kv_heads]`` for one model, scorer and target average ``c``.

    ``granularity == "layer"`` means every KV head of a layer has the same budget (EvolKV);
    ``"head"`` lets them differ. ``provenance`` is free-form but always holds ``method``
    (``evolved`` or a method's label, see ``evolalloc.core.composition``),
    ``evolalloc_version`` and ``created_at``; a search adds task, fitness,
    task_score, cache_score, lam, gamma, group_size, population, sigma0, seed, evaluations,
    optimizer and optimizer_version.

    ``decode``: the budgets are also held while decoding, cut back every ``decode.interval`` generated
    tokens (``core.decode_eviction``; the setting it was searched with); ``None``: prompt-only.
    """

    model: str
    geometry: ModelGeometry
    scorer: str = "snapkv"
    scorer_params: dict = field(default_factory=dict)
    target: float
    granularity: str = "layer"
    budgets: np.ndarray
    provenance: dict = field(default_factory=dict)
    decode: DecodeEviction | None = None

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
        self.decode = DecodeEviction.of(self.decode)
        self.scorer_params = dict(self.scorer_params)
        self.provenance = dict(self.provenance)
        if not is_method(self.provenance.get("method")):  # a known name or a composition's label
            raise ValueError(f"provenance['method'] must be one of {methods()} or a composition's label, "
                             f"got {self.provenance.get('method')!r}")
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

    def capped_budgets(self) -> np.ndarray:
        """``[L, H]`` what each (layer, head) can really hold: the budget, at most ``W - 1`` in a
        sliding layer of window ``W`` (the exporters ship these)."""
        caps = unit_caps(self.geometry, "layer")
        return self.budgets if caps is None else np.minimum(self.budgets, caps[:, None])

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

    def _rescaled(self, target: float, min_budget: int, rule: str = "proportional") -> np.ndarray:
        layers, heads = self.budgets.shape
        units = self.budgets[:, 0] if self.granularity == "layer" else self.budgets.reshape(-1)
        total = round(target * layers) if self.granularity == "layer" else round(target * layers * heads)
        if rule == "additive":
            # Every unit gains the same number of tokens; completion then only fixes rounding.
            units = np.maximum(units + round(target - self.target), 0)
        elif rule != "proportional" and rule not in TOPUP_RULES:  # a top-up's budgets are the proportional ones
            raise ValueError(f"unknown expansion rule {rule!r}; choose from {', '.join(EXPANSION_RULES)}")
        out = complete_budgets(units, total, min_budget, caps=unit_caps(self.geometry, self.granularity))
        return np.repeat(out[:, None], heads, axis=1) if self.granularity == "layer" else out.reshape(layers, heads)

    def complete(self, min_budget: int = 1) -> Allocation:
        """A copy whose total is exactly ``target_total`` (EvolKV §3.2), no unit below ``min_budget``."""
        provenance = dict(self.provenance, completed_from_total=self.total)
        return replace(self, budgets=self._rescaled(self.target, min_budget), provenance=provenance)

    def expand(self, target: float, min_budget: int = 1, rule: str = "proportional") -> Allocation:
        """This profile carried to a larger target ``c' >= c`` without a new search.

        ``rule`` (``EXPANSION_RULES``): ``proportional`` scales every budget by ``c' / c``
        (EvolKV's rule); ``additive`` gives every unit the same ``c' - c`` extra tokens, so the
        searched *differences* between units are kept and the new memory is spread evenly (a
        unit the search starved at ``c`` is not kept starved at ``4c``); ``topup`` (retention-gates only,
        ``core/topup.py``) keeps the profile as per-head floors and gives the extra ``(c' - c) * L * H``
        entries to the global top-k per input (adapter ``floors_under_global_topk``); ``topup-half`` the same
        with floors at half the profile. Either way the total is
        completed to exactly ``c'`` per unit and no budget decreases. Scores in ``provenance``
        still describe the search at the old target, recorded as ``expanded_from_target``.

        Only upwards, for every caller (the CLI's ``expand``, a recipe's expansions, the
        service's ``?budget=``): a profile searched at ``c`` says nothing about where a smaller
        cache should go (the always-kept tokens take a larger share of it); search there instead.
        ``ValueError`` for a target below ``c`` or ``min_budget``, or one whose total would not
        fit exactly in the budgets' integers.
        """
        self.check_expansion_target(target, min_budget)
        return self.rescale(target, min_budget, rule)

    def check_expansion_target(self, target: float, min_budget: int = 1) -> None:
        """``ValueError`` unless ``expand(target, min_budget)`` may carry this profile to ``target``."""
        if not (isinstance(target, (int, float)) and math.isfinite(target) and target > 0):
            raise ValueError(f"target must be a positive number, got {target!r}")
        if target < self.target:
            raise ValueError(f"{target:g} is not above the searched target {self.target:g}: a profile is only "
                             f"carried to larger budgets; search at {target:g} instead")
        if target < min_budget:
            raise ValueError(f"{target:g} is below the {min_budget} tokens every unit must keep")
        if target * self.budgets.size > MAX_TOTAL:
            raise ValueError(f"{target:g} tokens per unit over {self.budgets.size} units is more than "
                             f"{MAX_TOTAL} tokens in all")

    def rescale(self, target: float, min_budget: int = 1, rule: str = "proportional") -> Allocation:
        """The same shape at another target, in either direction, without ``expand``'s rule: for a
        family of budgets drawn from one profile (the curve export), never for shipping it."""
        if not (math.isfinite(target) and target > 0) or target * self.budgets.size > MAX_TOTAL:
            raise ValueError(f"target must be a positive number of at most {MAX_TOTAL} tokens in all, got {target!r}")
        provenance = dict(self.provenance, expanded_from_target=self.target, expansion_rule=rule)
        if rule in TOPUP_RULES:
            provenance.update(topup_provenance(self, target, rule))
        return replace(self, target=float(target), budgets=self._rescaled(target, min_budget, rule),
                       provenance=provenance)
