"""Allocation rules, one small file each, behind one registry, and the methods composed of them.

A rule turns a model geometry and a target ``c`` into budgets ``[num_layers, num_kv_heads]`` and
declares what it needs from the rest of evolalloc (``Baseline``): a scorer of its own (streaming
ranks with StreamingLLM's), a smallest target (streaming's 4 sinks), its granularity. A method is a
composition of a rule with a scorer and a per-input adapter (``core/composition.py``; aliases such
as ``uniform+adakv`` name the common ones), built by ``make_baseline`` (``composed.py``). The
allocation file's ``method`` names and the recipe's ``baselines`` check come from here; the
comparison's order and the plots' colours from ``report/method_style.py``. Add a rule by writing a
file in this package with a ``@register_baseline("name")`` subclass of ``Baseline``; nothing else lists it.

This package is part of ``evolalloc.core`` (a baseline is an allocation rule, like completion),
so the allocation file's schema can name the methods without importing anything above core. The
registry itself is ``evolalloc.core.methods`` (re-exported here), so that ``Allocation`` can check
a method without importing the baselines that build allocations.
"""

from __future__ import annotations

from evolalloc.core.baselines.base import Baseline, register_baseline
from evolalloc.core.baselines.composed import Composed, make_baseline, reading_checkpoints
from evolalloc.core.composition import ALIASES, Composition, methods
from evolalloc.core.methods import BASELINES, EVOLVED, default_baselines

__all__ = ["ALIASES", "BASELINES", "EVOLVED", "Baseline", "Composed", "Composition", "default_baselines",
           "make_baseline", "methods", "reading_checkpoints", "register_baseline"]
