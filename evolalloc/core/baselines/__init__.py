"""Baseline allocations, one small file each, behind one registry.

A baseline turns a model geometry and a target ``c`` into budgets ``[num_layers, num_kv_heads]``
and declares what it needs from the rest of evolalloc (``Baseline``): a scorer of its own
(streaming ranks with StreamingLLM's), a smallest target (streaming's 4 sinks), its granularity,
and where it sits in tables and plots. The allocation file's ``method`` names, the recipe's
``baselines`` check, the CLI's choices, the comparison's order and the plots' colours all come
from here. Add one by writing a file in this package with a ``@register_baseline("name")`` subclass of
``Baseline``; nothing else lists it.

This package is part of ``evolalloc.core`` (a baseline is an allocation rule, like completion),
so the allocation file's schema can name the methods without importing anything above core. The
registry itself is ``evolalloc.core.methods`` (re-exported here), so that ``Allocation`` can check
a method without importing the baselines that build allocations.
"""

from __future__ import annotations

from evolalloc.core.baselines.base import Baseline, register_baseline
from evolalloc.core.methods import (
           BASELINES,
           EVOLVED,
           baseline_names,
           default_baselines,
           make_baseline,
           methods,
           ordered,
)

__all__ = ["BASELINES", "EVOLVED", "Baseline", "baseline_names", "default_baselines", "make_baseline", "methods",
           "ordered",
           "register_baseline"]
