"""Expansion rule ``topup``: the searched profile stays as per-head floors, the extra memory goes
to one global top-k of the retention gates' scores, per input.

``proportional`` and ``additive`` carry a profile searched at ``c`` to ``c' > c`` by guessing a
static shape for the new memory; neither was ever scored at ``c'``. The global top-k
(``global`` adapter) needs no guess: it compares every (layer, head, token) by calibrated scores
and puts each input's memory where that input needs it. ``topup`` keeps what the search found
and lets the top-k place only what the search never saw:

* budgets ``b'``: the proportional expansion of ``b`` to ``c'`` (their total ``c' * L * H`` is
  what the global top-k keeps);
* adapter ``floors_under_global_topk`` (``evolalloc.runtime.adaptive``) with ``floor_fraction =
  c / c'``: head ``(l, h)`` first keeps ``floor(c / c' * b'[l, h]) ~= b[l, h]`` tokens (its
  searched budget, up to one token of rounding), then the ``(c' - c) * L * H`` extra entries go
  to the best remaining tokens of all heads at once.

At ``c' == c`` it is the profile itself (floors = budgets, nothing left over).

``topup-half`` is the same with floors at *half* the searched budgets (``floor_fraction =
c / (2 c')``): every head still keeps at least half of what the search gave it, and the
global top-k places the other ``(c' - c/2) * L * H`` entries per input. Why a second rule: on the
7-digit prose needle's search split (48 prompts), full floors scored below the plain global top-k
at 48 and 64 for every seed, half floors never below it (results/design-number-topup-half/README.md).
The floors are the same ``~ b/2`` at every ``c' > c``, so for one input the count a head keeps
never falls as ``c'`` grows (a fixed floor, a larger global total); unlike ``topup`` it can fall
below the searched ``b`` itself at ``c' > c``.

Only for the
``retention-gates`` scorer: a global top-k needs scores on one scale across layers. A profile already
read by ``floors_under_global_topk`` (searched floors, fraction ``f``) keeps its floors: the new
fraction is ``f * c / c'``. A profile that spells its scorer or adapter by the old names
(``gates``, ``gate_floors``) is read alike, and its expansion names the adapter the old way too, as
it always did. Plain numpy-free arithmetic on provenance; the allocation's budgets come from
``Allocation.expand``.
"""

from __future__ import annotations

from evolalloc.core.scorer_names import canonical_scorer
from searchspaces.floors_under_global_topk import ADAPTER, DEFAULT_FLOOR_FRACTION, SCORER
from searchspaces.registry import ADAPTER_ALIASES, OLD_ADAPTER_NAME, canonical_adapter

TOPUP = "topup"
TOPUP_HALF = "topup-half"
#: The share of each head's searched budget a rule keeps as its floor at ``c' > c``.
FLOOR_SHARE = {TOPUP: 1.0, TOPUP_HALF: 0.5}
TOPUP_RULES = tuple(FLOOR_SHARE)


def topup_problem(scorer: str, adapter: str | None, rule: str = TOPUP) -> str | None:
    """Why a profile ranking with ``scorer`` and read by ``adapter`` cannot be topped up, or ``None``."""
    if canonical_scorer(scorer) != SCORER:
        return (f"expansion rule {rule!r} gives the extra tokens to the {SCORER!r} scorer's global top-k; "
                f"scorer {scorer!r}'s scores are not on one scale across layers (use proportional or additive)")
    if canonical_adapter(adapter) not in (None, ADAPTER):
        return (f"expansion rule {rule!r} reads the budgets as per-head floors, but this profile's budgets are "
                f"read by adapter {adapter!r} (use proportional or additive)")
    return None


def topup_provenance(allocation, target: float, rule: str = TOPUP) -> dict:
    """The provenance entries that make ``allocation``'s proportional expansion to ``target`` a top-up:
    ``{"adapter": "floors_under_global_topk", "adapter_params": {"floor_fraction": share * f * c / c'}}`` (``share``
    1 for ``topup``, 0.5 for ``topup-half``; ``f`` 1 for a static profile).

    ``ValueError`` for a profile ``topup_problem`` refuses, an unknown rule, or a target below the profile's.
    """
    if rule not in FLOOR_SHARE:
        raise ValueError(f"not a top-up rule: {rule!r} (choose from {', '.join(TOPUP_RULES)})")
    provenance = allocation.provenance
    problem = topup_problem(allocation.scorer, provenance.get("adapter"), rule)
    if problem:
        raise ValueError(problem)
    if target < allocation.target:
        raise ValueError(f"expansion rule {rule!r} only adds tokens: {target:g} is below {allocation.target:g}")
    fraction = 1.0  # a static profile: all of it is floor
    if canonical_adapter(provenance.get("adapter")) == ADAPTER:
        fraction = float((provenance.get("adapter_params") or {}).get("floor_fraction", DEFAULT_FLOOR_FRACTION))
    if rule == TOPUP_HALF and target == allocation.target:
        return {}  # at c itself both rules ship the searched profile, unchanged
    share = FLOOR_SHARE[rule]
    # A profile in the old spelling (scorer ``gates``) names the adapter the old way, as it always did.
    old_spelling = allocation.scorer != SCORER or provenance.get("adapter") in ADAPTER_ALIASES
    return {"adapter": OLD_ADAPTER_NAME[ADAPTER] if old_spelling else ADAPTER,
            "adapter_params": {"floor_fraction": share * fraction * allocation.target / float(target)}}


__all__ = ["FLOOR_SHARE", "TOPUP", "TOPUP_HALF", "TOPUP_RULES", "topup_problem", "topup_provenance"]
