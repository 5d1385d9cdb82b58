"""The methods an allocation may come from: ``evolved`` (a search) and the registered baselines.

The registry of baselines lives here, outside the ``baselines`` package, because an
``Allocation`` checks its ``provenance.method`` against it while every baseline file builds
``Allocation``s: with the registry here, ``allocation -> methods`` and ``baselines -> allocation``
are both one-way. The registry imports the package's files itself the first time it needs them.
This module never imports ``baselines`` (not even for a type checker: that edge closed a circle);
its entries are ``Baseline`` subclasses (``core/baselines/base.py``), typed here as plain classes.
"""

from __future__ import annotations

from typing import Iterable

from evolalloc.registry import Registry

#: The method of a searched profile; every other method is a registered baseline.
EVOLVED = "evolved"

# Found by file: each module of ``evolalloc.core.baselines`` registers its baseline when imported.
BASELINES: Registry[type] = Registry("baseline", package="evolalloc.core.baselines")  # of Baseline subclasses


def baseline_names() -> list[str]:
    """Every baseline, in table order (each one's ``order``, then its name)."""
    return ordered(BASELINES.load_all())


def default_baselines() -> list[str]:
    """The baselines a recipe compares with when it names none (each one's ``default``)."""
    known = BASELINES.load_all()
    return [name for name in ordered(known) if known[name].default]


def methods() -> tuple[str, ...]:
    """Every ``provenance.method`` an allocation may have: ``evolved``, then the baselines."""
    return (EVOLVED, *baseline_names())


def make_baseline(name: str, **params):
    """Baseline ``name`` (a ``Baseline``) built with its parameters (``UnknownNameError`` with did-you-mean)."""
    return BASELINES.create(name, **params)


def allocation_adapter(allocation) -> tuple[str, dict] | None:
    """``(name, params)`` of the runtime budget adapter ``allocation``'s budgets are meant for, or
    ``None`` (static budgets): an input-adaptive baseline's own (AdaKV, CAKE, the global gates:
    ``Baseline.adapter``), or the one a searched profile names in ``provenance.adapter`` (the hybrids),
    with the parameters in ``provenance.adapter_params`` (``gate_floors``' ``floor_fraction``)."""
    method = allocation.provenance.get("method")
    if method in BASELINES.load_all():
        declared = make_baseline(method).adapter
        if declared is not None:
            return declared
    named = allocation.provenance.get("adapter")
    return (named, dict(allocation.provenance.get("adapter_params") or {})) if named else None


def ordered(names: Iterable[str]) -> list[str]:
    """``names`` in table order: evolved, the baselines by their ``order``, then anything else."""
    known = BASELINES.load_all()

    def key(name: str) -> tuple:
        if name == EVOLVED:
            return (0, 0, "")
        if name in known:
            return (1, known[name].order, name)
        return (2, 0, name)

    return sorted(names, key=key)


__all__ = ["BASELINES", "EVOLVED", "allocation_adapter", "baseline_names", "default_baselines", "make_baseline",
           "methods", "ordered"]
