"""Plots are written as non-empty PNG files from plain data."""

import numpy as np

from evolalloc.core.allocation import Allocation
from evolalloc.report.plots import (
    best_so_far,
    plot_fitness_history,
    plot_head_budgets,
    plot_layer_budgets,
    plot_score_vs_budget,
)
from tests.report.conftest import GEOMETRY

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def is_png(path):
    data = path.read_bytes()
    return data.startswith(PNG_MAGIC) and len(data) > 2000


def test_budgets_per_layer_plot_is_a_png(profiles, tmp_path):
    assert is_png(plot_layer_budgets(profiles, tmp_path / "layers.png"))


def test_head_budgets_heat_map_is_a_png(tmp_path):
    budgets = np.arange(12).reshape(6, 2) * 10 + 4
    alloc = Allocation(model="m", geometry=GEOMETRY, target=64, granularity="head", budgets=budgets,
                       provenance={"method": "evolved"})
    assert is_png(plot_head_budgets(alloc, tmp_path / "heads.png"))


def test_fitness_history_plot_is_a_png_even_with_failures(history, tmp_path):
    assert is_png(plot_fitness_history(history, tmp_path / "fitness.png"))


def test_an_empty_history_still_plots(tmp_path):
    assert is_png(plot_fitness_history([], tmp_path / "empty.png"))


def test_score_vs_budget_plot_is_a_png(rows, tmp_path):
    assert is_png(plot_score_vs_budget(rows, tmp_path / "nested" / "score.png"))


def test_best_so_far_ignores_failures_and_never_decreases(history):
    assert best_so_far(history) == [0.5, 0.7, 0.7, 0.7, 0.9, 0.9, 1.1, 1.1]


def test_best_so_far_reads_record_objects_too():
    class Record:
        def __init__(self, fitness, state):
            self.fitness, self.state, self.group = fitness, state, 0

    assert best_so_far([Record(None, "FAIL"), Record(0.3, "COMPLETE")]) == [None, 0.3]


def test_a_long_legend_stands_beside_the_score_axes_where_it_hides_no_point(rows):
    import dataclasses

    import matplotlib.pyplot as plt

    from evolalloc.report.plots import LEGEND_INSIDE, _score_panel

    for copies, beside in ((1, False), (LEGEND_INSIDE + 1, True)):
        many = [dataclasses.replace(row, method=f"{row.method}-{k}" if k else row.method)
                for k in range(copies) for row in rows]
        fig, ax = plt.subplots()
        _score_panel(ax, many)
        fig.canvas.draw()
        legend, axes = ax.get_legend().get_window_extent(), ax.get_window_extent()
        assert bool(legend.x0 >= axes.x1) is beside, copies
        plt.close(fig)
