"""Expansion rule ``topup``: the searched profile stays as per-head floors, the extra memory goes
to the gates' one global top-k, per input.

``proportional`` and ``additive`` carry a profile searched at ``c`` to ``c' > c`` by guessing a
static shape for the new memory; neither was ever scored at ``c'``. The gates' global top-k
(``global`` adapter) needs no guess: it compares every (layer, head, token) by calibrated scores
and puts each input's memory where that input needs it. ``topup`` keeps what the search found
and lets the gates place only what the search never saw:

* budgets ``b'``: the proportional expansion of ``b`` to ``c'`` (their total ``c' * L * H`` is
  what the global top-k keeps);
* adapter ``gate_floors`` (``evolalloc.runtime.adaptive.gate_floors``) with ``floor_fraction =
  c / c'``: head ``(l, h)`` first keeps ``floor(c / c' * b'[l, h]) ~= b[l, h]`` tokens (its
  searched budget, up to one token of rounding), then the ``(c' - c) * L * H`` extra entries go
  to the best remaining tokens of all heads at once.

At ``c' == c`` it is the profile itself (floors = budgets, nothing left over). Only for the
``gates`` scorer: a global top-k needs scores on one scale across layers. A profile already read
by ``gate_floors`` (searched floors, fraction ``f``) keeps its floors: the new fraction is
``f * c / c'``. Plain numpy-free arithmetic on provenance; the allocation's budgets come from
``Allocation.expand``.
"""

from __future__ import annotations

from searchspaces.gate_floors import ADAPTER, DEFAULT_FLOOR_FRACTION, SCORER

TOPUP = "topup"


def topup_problem(scorer: str, adapter: str | None) -> str | None:
    """Why a profile ranking with ``scorer`` and read by ``adapter`` cannot be topped up, or ``None``."""
    if scorer != SCORER:
        return (f"expansion rule {TOPUP!r} gives the extra tokens to the {SCORER!r} scorer's global top-k; "
                f"scorer {scorer!r}'s scores are not on one scale across layers (use proportional or additive)")
    if adapter not in (None, ADAPTER):
        return (f"expansion rule {TOPUP!r} reads the budgets as per-head floors, but this profile's budgets are "
                f"read by adapter {adapter!r} (use proportional or additive)")
    return None


def topup_provenance(allocation, target: float) -> dict:
    """The provenance entries that make ``allocation``'s proportional expansion to ``target`` a top-up:
    ``{"adapter": "gate_floors", "adapter_params": {"floor_fraction": f * c / c'}}``.

    ``ValueError`` for a profile ``topup_problem`` refuses, or a target below the profile's.
    """
    provenance = allocation.provenance
    problem = topup_problem(allocation.scorer, provenance.get("adapter"))
    if problem:
        raise ValueError(problem)
    if target < allocation.target:
        raise ValueError(f"expansion rule {TOPUP!r} only adds tokens: {target:g} is below {allocation.target:g}")
    fraction = 1.0  # a static profile: all of it is floor
    if provenance.get("adapter") == ADAPTER:
        fraction = float((provenance.get("adapter_params") or {}).get("floor_fraction", DEFAULT_FLOOR_FRACTION))
    return {"adapter": ADAPTER, "adapter_params": {"floor_fraction": fraction * allocation.target / float(target)}}


__all__ = ["TOPUP", "topup_problem", "topup_provenance"]
