"""How each method is presented: its place in tables and plots, its colour, and whether it is drawn
on "budgets per layer". Presentation only: keyed by the method's label (``core/composition.py``);
``core`` knows nothing of it.

A method with no entry (a new composition, a plugin's rule) comes after the listed ones, by name,
in matplotlib's next colour; it is drawn on the budgets plot only when its budgets are its rule's
own (no adapter moves them per input, no scorer of its own shapes them like another row's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from evolalloc.core.composition import CompositionProblem, parse_label
from evolalloc.core.methods import BASELINES, EVOLVED


@dataclass(frozen=True)
class Style:
    order: int  # smaller first; evolved is always first
    color: str | None  # None: matplotlib's next one
    in_budget_plot: bool = True  # False when the budgets drawn would be another row's (or per input)


#: Every listed method has a colour of its own: rows of one plot are told apart by colour alone
#: (``tests/report/test_method_style.py``).
STYLES: dict[str, Style] = {
    EVOLVED: Style(0, "#d62728"),
    "uniform": Style(1, "#1f77b4"),
    "pyramid": Style(2, "#2ca02c"),
    "streaming": Style(3, "#9467bd", in_budget_plot=False),  # its budgets are uniform's; only the kept tokens differ
    "uniform-snapkv": Style(6, "#aec7e8", in_budget_plot=False),  # its budgets are uniform's (a lighter blue)
    "pyramid-snapkv": Style(7, "#98df8a"),  # a lighter green than pyramid's
    "evolved+adakv": Style(10, "#e377c2", in_budget_plot=False),  # static budgets are its base's
    "uniform+adakv": Style(11, "#17becf", in_budget_plot=False),
    "pyramid+adakv": Style(12, "#bcbd22", in_budget_plot=False),
    "cake": Style(13, "#8c564b", in_budget_plot=False),  # per-instance budgets are in the records
    # uniform's budgets ranked by the trained gates (a lighter grey than their global top-k's)
    "uniform-retention-gates": Style(14, "#c7c7c7", in_budget_plot=False),
    "global-topk": Style(15, "#7f7f7f", in_budget_plot=False),  # real budgets are per instance (`evolalloc gates eval`)
    "lukv": Style(16, "#ff7f0e"),
    "full": Style(17, "#000000", in_budget_plot=False),  # every token: the ceiling, not a profile to draw
}
UNLISTED_ORDER = 100


def style(method: str) -> Style:
    """``method``'s style: its entry (a rule's old name finds it too: ``gates`` is ``global-topk``), else the
    default for an unlisted method (module docstring)."""
    if BASELINES.canonical(method) in STYLES:
        return STYLES[BASELINES.canonical(method)]
    try:
        composition = parse_label(method)
    except CompositionProblem:
        return Style(UNLISTED_ORDER, None, in_budget_plot=False)
    return Style(UNLISTED_ORDER, None, in_budget_plot=composition.adapter is None and composition.scorer is None)


def method_color(method: str) -> str | None:
    return style(method).color


def in_budget_plot(method: str) -> bool:
    return style(method).in_budget_plot


def ordered(names: Iterable[str]) -> list[str]:
    """``names`` in table order: evolved, the listed methods by their order, then the rest by name."""
    return sorted(names, key=lambda name: (0 if name == EVOLVED else 1, style(name).order, name))


__all__ = ["STYLES", "Style", "in_budget_plot", "method_color", "ordered", "style"]
