"""The registry of allocation rules (the baselines' budgets) and the name of a searched profile.

The registry lives here, outside the ``baselines`` package, because an ``Allocation`` checks its
``provenance.method`` (through ``core/composition.py``) while every baseline file builds
``Allocation``s: with the registry here, ``allocation -> composition -> methods`` and
``baselines -> allocation`` are all one-way. The registry imports the package's files itself the
first time it needs them. This module never imports ``baselines`` (not even for a type checker: that
edge closed a circle); its entries are ``Baseline`` subclasses (``core/baselines/base.py``), typed
here as plain classes. A method is a composition of a rule with a scorer and an adapter
(``core/composition.py``); its presentation (table order, colour) is the report's
(``report/method_style.py``).
"""

from __future__ import annotations

from evolalloc.registry import Registry

#: The method of a searched profile; every other method is a composition of a registered rule.
EVOLVED = "evolved"

#: Old rule names -> current ones: recipes, allocation files and comparisons may still say the old one.
RULE_ALIASES = {"gates": "global-topk"}  # the global top-k was named after the scorer it reads

# Found by file: each module of ``evolalloc.core.baselines`` registers its rule when imported.
BASELINES: Registry[type] = Registry("baseline", package="evolalloc.core.baselines",
                                     aliases=RULE_ALIASES)  # of Baseline subclasses

#: A recipe's default comparison, in this order; then any other registered rule whose ``default`` is true.
CORE_DEFAULTS = ("uniform", "pyramid", "streaming")


def default_baselines() -> list[str]:
    """The baselines a recipe compares with when it names none (each rule's ``default``)."""
    known = BASELINES.load_all()
    others = sorted(name for name, rule in known.items() if rule.default and name not in CORE_DEFAULTS)
    return [name for name in CORE_DEFAULTS if name in known] + others


__all__ = ["BASELINES", "CORE_DEFAULTS", "EVOLVED", "RULE_ALIASES", "default_baselines"]
