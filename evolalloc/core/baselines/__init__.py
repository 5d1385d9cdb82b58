"""Baseline allocations, one small file each, behind one registry.

A baseline turns a model geometry and a target ``c`` into budgets ``[num_layers, num_kv_heads]``
and declares what it needs from the rest of evolalloc (``Baseline``): a scorer of its own
(streaming ranks with StreamingLLM's), a smallest target (streaming's 4 sinks), its granularity,
and where it sits in tables and plots. The allocation file's ``method`` names, the recipe's
``baselines`` check, the CLI's choices, the comparison's order and the plots' colours all come
from here. Add one by writing a file in this package with a ``@register_baseline`` subclass of
``Baseline``; nothing else lists it.

This package is part of ``evolalloc.core`` (a baseline is an allocation rule, like completion),
so the allocation file's schema can name the methods without importing anything above core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from named_registry import Registry

if TYPE_CHECKING:
    from evolalloc.core.baselines.base import Baseline

#: The method of a searched profile; every other method is a registered baseline.
EVOLVED = "evolved"

BASELINES: Registry[type["Baseline"]] = Registry("baseline", package=__name__)


def register_baseline(cls: type["Baseline"]) -> type["Baseline"]:
    """Class decorator: register a ``Baseline`` subclass under its ``name`` class attribute."""
    from evolalloc.core.baselines.base import Baseline

    if not (isinstance(cls, type) and issubclass(cls, Baseline)) or not cls.name:
        raise TypeError(f"a baseline must be a Baseline subclass with a name, got {cls!r}")
    return BASELINES.register(cls.name)(cls)


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


def make_baseline(name: str, **params) -> "Baseline":
    """Baseline ``name`` built with its parameters (``UnknownNameError`` with did-you-mean)."""
    return BASELINES.create(name, **params)


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


__all__ = ["BASELINES", "EVOLVED", "baseline_names", "default_baselines", "make_baseline", "methods", "ordered", "register_baseline"]
