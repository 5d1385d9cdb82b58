"""Table order, colours and the budgets plot come from the report's table, keyed by the method's label."""

from __future__ import annotations

from evolalloc.core.baselines.base import Baseline
from evolalloc.report.method_style import STYLES, in_budget_plot, method_color, ordered
from evolalloc.report.plots import EVOLVED_COLOR


def test_rows_come_in_the_report_s_order_evolved_first_and_unlisted_methods_last_by_name():
    names = ["pyramid+cake", "cake", "lukv", "uniform", "evolved", "pyramid", "evolved+adakv", "aaa+adakv"]
    assert ordered(names) == ["evolved", "uniform", "pyramid", "evolved+adakv", "cake", "lukv", "aaa+adakv",
                              "pyramid+cake"]


def test_colours_are_the_report_s_and_core_declares_none():
    assert method_color("evolved") == EVOLVED_COLOR == STYLES["evolved"].color
    assert method_color("uniform") == "#1f77b4" and method_color("pyramid+cake") is None
    assert not any(hasattr(Baseline, attribute) for attribute in ("color", "order", "in_budget_plot"))


def test_only_methods_whose_budgets_are_their_own_are_drawn_on_the_budgets_plot():
    assert in_budget_plot("evolved") and in_budget_plot("pyramid") and in_budget_plot("lukv")
    assert not in_budget_plot("uniform+adakv") and not in_budget_plot("streaming")
    assert not in_budget_plot("pyramid+cake")  # an adapter moves them per input


def test_every_listed_method_has_a_colour_of_its_own():
    """A plot tells its rows apart by colour only: two listed methods sharing one (cake and lukv did,
    both brown, in every long-context plot) make a legend that cannot be read."""
    from evolalloc.report.method_style import STYLES

    colours = [s.color for s in STYLES.values() if s.color is not None]
    shared = {c: [m for m, s in STYLES.items() if s.color == c] for c in colours if colours.count(c) > 1}
    assert not shared
