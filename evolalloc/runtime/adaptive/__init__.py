"""Budget adapters: per-instance budgets from a record's scores, applied when a row is compressed.

A static allocation gives budgets ``[num_layers, num_kv_heads]``; an input-adaptive method
(AdaKV, CAKE, the global top-k) moves that budget around *per instance*, from what the
prefill measured. That needs the record, so it happens in the runtime, just before compression:
``compress_batch`` calls ``scorer.adapt(record, budgets)`` when the scorer it was given is an
``Adapted`` one (a scorer plus an adapter). Everything else (engines, evaluators, decode) sees
an ordinary scorer with the same ``key``, so the records it prefilled serve adapted methods too.

An adapter is one small file in this package: a ``@register_adapter("name")`` dataclass subclass of
``BudgetAdapter`` implementing ``adapt``. A method names one in its composition
(``{allocation: uniform, adapter: adakv}``, ``core/composition.py``), by name only, at its defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from evolalloc.registry import BadParametersError, Registry
from evolalloc.runtime.scorers import SCORERS, Scorer
from searchspaces.registry import ADAPTER_ALIASES


@dataclass
class BudgetAdapter:
    """Turns a row's budgets into per-instance budgets. Subclasses set ``name``, implement ``adapt``."""

    name: ClassVar[str] = ""
    # Set by an adapter that compares scores across layers and heads: the one scorer whose scores are
    # calibrated for that (the retention gates' shared final projection); ``check`` refuses any other.
    calibrated_scorer: ClassVar[str | None] = None
    # What the adapter does with those scores, for ``check``'s message ("shifts", "compares", ...).
    calibrated_use: ClassVar[str] = "compares"

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def check(self, scorer: Scorer) -> None:
        """``ValueError`` if this adapter cannot read ``scorer``'s scores (asked before any prefill)."""
        if self.calibrated_scorer is not None and SCORERS.canonical(scorer.name) != self.calibrated_scorer:
            raise ValueError(f"the {self.name} adapter {self.calibrated_use} the {self.calibrated_scorer!r} scorer's "
                             f"calibrated scores; scorer {scorer.name!r}'s are not on one scale across layers")

    def adapt(self, record, budgets: np.ndarray, scorer: Scorer) -> np.ndarray:
        """int64 ``[num_layers, num_kv_heads]`` for ``record`` from validated ``budgets`` (same shape).

        Each result is >= ``scorer.min_budget`` (validation runs again afterwards).
        """
        raise NotImplementedError


# The hybrids' adapters were named after the gates; their old names still load (searchspaces.registry).
ADAPTERS: Registry[type[BudgetAdapter]] = Registry("budget adapter", base=BudgetAdapter, package=__name__,
                                                   aliases=ADAPTER_ALIASES)


def register_adapter(name: str):
    """Class decorator: register a ``BudgetAdapter`` subclass as ``name`` (which sets its ``name``)."""
    return ADAPTERS.register(name)


def get_adapter(name: str, **params) -> BudgetAdapter:
    """An adapter by name (``UnknownNameError`` with did-you-mean, a ``ValueError``)."""
    try:
        return ADAPTERS.create(name, **params)
    except BadParametersError as exc:
        raise ValueError(f"bad parameters for budget adapter {name!r}: {exc}") from None


class Adapted:
    """``scorer`` whose rows get ``adapter``'s per-instance budgets; otherwise it *is* ``scorer``
    (same ``key``, ``always_kept``, ranking), so evaluators and records need no change."""

    def __init__(self, scorer: Scorer, adapter: BudgetAdapter):
        adapter.check(scorer)
        self.scorer, self.adapter = scorer, adapter

    def __getattr__(self, name):
        return getattr(self.scorer, name)

    def __getstate__(self):  # pickled to Ray workers; __getattr__ must not recurse before __dict__ exists
        return self.__dict__

    def __setstate__(self, state):
        self.__dict__.update(state)

    def adapt(self, record, budgets: np.ndarray) -> np.ndarray:
        return self.adapter.adapt(record, budgets, self.scorer)

    @property
    def selection_key(self) -> str:
        """Identifies how tokens are selected (``key`` identifies only the ranking it reads)."""
        params = ",".join(f"{k}={v}" for k, v in sorted(self.adapter.params().items()))
        return f"{self.scorer.key}+{self.adapter.name}({params})"

    def __repr__(self) -> str:
        return f"Adapted({self.scorer!r}, {self.adapter!r})"


def record_scores(record, scorer: Scorer):
    """``[num_layers, Hkv, L]`` float32 scores in ranking order, or ``ValueError``."""
    scores = getattr(record, "scores", {}).get(scorer.key)
    if scores is None:
        raise ValueError(f"record {record.uid!r} holds no scores for scorer {scorer.key!r}; prefill it again")
    return scores


def top_with_floor(ranked_scores, floor, total: int) -> np.ndarray:
    """How many of each group's best entries one top-``total`` over all groups keeps.

    ``ranked_scores``: ``[G, L]`` float, each row in its own ranking order (non-increasing).
    ``floor``: an int (every group's) or int ``[G]`` (each group's own), each capped at ``L``.
    Every group first keeps its floor's best entries (the safeguard); the remaining
    ``total - sum(floors)`` go to the best of what is left, over all groups at once. Ties go to
    the better rank, then to the lower group, so identical groups split the budget evenly.
    Returns int64 ``[G]`` summing to ``min(total, G * L)``, each in ``[min(floor_g, L), L]``.
    """
    import torch

    scores = torch.as_tensor(ranked_scores, dtype=torch.float32)
    groups, length = scores.shape
    floors = np.minimum(np.broadcast_to(np.asarray(floor, dtype=np.int64), (groups,)), length)
    if np.any(floors < 0):
        raise ValueError(f"floors must be >= 0, got {floors.min()}")
    if total < floors.sum():
        raise ValueError(f"a total of {total} cannot give {groups} groups their floors ({int(floors.sum())} in all)")
    counts = floors.copy()
    extra = min(int(total), groups * length) - int(floors.sum())
    if extra > 0:
        # Rank-major, group-minor (index r * G + g), so a stable sort breaks ties by rank, then group;
        # only entries past their group's floor compete.
        flat = scores.T.reshape(-1)
        rank = torch.arange(length).repeat_interleave(groups)
        free = torch.nonzero(rank >= torch.as_tensor(floors).repeat(length), as_tuple=True)[0]
        order = free[torch.argsort(flat[free], descending=True, stable=True)[:extra]]
        counts += np.bincount((order % groups).numpy(), minlength=groups)
    return counts


__all__ = ["ADAPTERS", "Adapted", "BudgetAdapter", "get_adapter", "record_scores", "register_adapter", "top_with_floor"]
