"""Plots are written as non-empty PNG files from plain data."""

import numpy as np

import evolalloc.report.plots as plots
from evolalloc.core.allocation import Allocation
from evolalloc.report.plots import (
    best_so_far,
    plot_fitness_history,
    plot_head_budgets,
    plot_layer_budgets,
    plot_score_vs_budget,
)
from evolalloc.search.stopping import CAP, NO_GAIN, GroupSummary
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


def _group_labels(records, stops, tmp_path, monkeypatch) -> list[str]:
    """The fitness plot's annotations, read from the figure before it is saved."""
    texts = []
    save = plots._save

    def keep_texts(fig, path):
        texts.extend(t.get_text() for ax in fig.axes for t in ax.texts)
        texts.extend(f"title: {ax.get_title()}" for ax in fig.axes if ax.get_title())
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", keep_texts)
    plot_fitness_history(records, tmp_path / "fitness.png", stops=stops)
    return texts


def test_a_group_the_cap_stopped_is_labelled_not_converged(history, tmp_path, monkeypatch):
    """The plot says what the report and ``show`` say: a capped group was still gaining."""
    stops = [GroupSummary(0, 20, 80, NO_GAIN, 0.5, 0.7), GroupSummary(1, 20, 80, CAP, 0.7, 1.1)]
    labels = _group_labels(history, stops, tmp_path, monkeypatch)
    assert any(t.startswith("group 1") and "no gain" in t and "not converged" not in t for t in labels), labels
    assert any(t.startswith("group 2") and "20 gen., cap, not converged" in t for t in labels), labels


def test_a_later_passs_group_is_labelled_with_the_group_it_searches_again(history, tmp_path, monkeypatch):
    stops = [GroupSummary(0, 3, 12, NO_GAIN, 0.5, 0.7, pass_number=1, space_group=0),
             GroupSummary(1, 3, 12, NO_GAIN, 0.7, 1.1, pass_number=2, space_group=0)]
    labels = _group_labels(history, stops, tmp_path, monkeypatch)
    assert any(t.startswith("group 2\n(pass 2, group 1 again)\n") for t in labels), labels
    assert any(t.startswith("group 1\n(pass 1)\n") for t in labels), labels
    assert "title: Fitness over evaluations: overall and within each layer group" in labels


def test_the_report_says_a_search_of_two_passes_and_which_groups_are_the_second():
    from evolalloc.report.markdown import stop_lines

    stops = [GroupSummary(g, 3, 12, NO_GAIN, 0.5, 0.7, pass_number=g // 2 + 1, space_group=g % 2) for g in range(4)]
    lines = stop_lines(stops)
    assert lines[0].startswith("Searched in 2 passes: groups 3 and after search the first pass's groups again")
    assert lines[3] == ("- group 3 (pass 2, group 1 again): 3 generations (12 evaluations), stopped: no gain; "
                        "gained +0.2")
    assert not any("passes" in line for line in stop_lines(stops[:2]))
    from evolalloc.report.markdown import progress_section

    history = [{"group": g, "generation": 0, "candidate": 0, "state": "COMPLETE", "fitness": 0.5 + g / 10,
                "task_score": 0.5} for g in range(4)]
    table = "\n".join(progress_section(history, groups=stops))
    assert "| 3 (pass 2, group 1 again) |" in table and "| 1 (pass 1) |" in table, table


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
