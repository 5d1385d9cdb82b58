"""Reports of the search protocol: within-group progress (and flat groups), several tasks' rows."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.config.resolved import resolve_run
from evolalloc.report.comparison import OVERALL, compare_scores, compare_tasks, load_comparison, save_comparison
from evolalloc.report.markdown import render_report
from evolalloc.report.plots import group_progress, plot_fitness_history, plot_score_vs_budget
from tests.report.test_plots import is_png


def trial(group, generation, fitness, task_score=None, state="COMPLETE"):
    return {"group": group, "generation": generation, "fitness": fitness, "state": state,
            "task_score": fitness if task_score is None else task_score}


@pytest.fixture
def climbing():
    """Group 1 climbs over its generations; group 2 is flat (one task score, CacheScore wiggles)."""
    return [trial(0, 0, 0.30), trial(0, 0, 0.40), trial(0, 1, 0.45), trial(0, 1, None, state="FAIL"),
            trial(0, 2, 0.60), trial(0, 2, 0.55),
            trial(1, 0, 0.62, 0.5), trial(1, 0, 0.61, 0.5), trial(1, 1, 0.63, 0.5), trial(1, 1, 0.60, 0.5)]


def test_group_progress_measures_the_gain_after_the_first_generation_and_spots_flat_groups(climbing):
    first, second = group_progress(climbing)
    assert (first.first, first.last, first.evaluations, first.failed) == (1, 6, 6, 1)
    assert first.best == 0.60 and first.best_at == 5
    assert first.first_generation_best == 0.40 and first.within_gain == pytest.approx(0.20)
    assert first.task_scores == 5 and not first.flat
    assert second.flat and second.task_scores == 1 and second.within_gain == pytest.approx(0.01)


def test_the_report_says_which_groups_were_flat(climbing, recipe):
    text = render_report(resolve_run(recipe), history=climbing)
    assert "Flat group(s) 2:" in text
    assert "| 1 | 6 | 1 | 0.6000 | +0.2000 | 5 | 6 | 0.6000 |" in text


def test_the_report_says_which_groups_the_cap_stopped_before_they_converged(climbing, recipe):
    from evolalloc.search.stopping import CAP, NO_GAIN, GroupSummary

    groups = [GroupSummary(0, 3, 6, NO_GAIN, 0.3, 0.6), GroupSummary(1, 20, 4, CAP, 0.6, 0.63)]
    text = render_report(resolve_run(recipe), history=climbing, groups=groups)
    assert "group 2: 20 generations (4 evaluations), stopped: the cap of 20 generations, before it converged" in text
    assert "Not converged: group 2 still gained" in text and "group 1:" in text
    assert "Not converged" not in render_report(resolve_run(recipe), history=climbing, groups=groups[:1])


def test_the_fitness_plot_draws_a_climbing_and_a_flat_group(climbing, tmp_path):
    assert is_png(plot_fitness_history(climbing, tmp_path / "fitness.png"))


def scores_for(n, good, offset=0):
    uids = [f"i{k}" for k in range(n)]
    return {u: 1.0 if k < good else 0.0 for k, u in enumerate(uids)}


@pytest.fixture
def two_tasks():
    return {
        "passkey": {"evolved": {64: scores_for(10, 8)}, "uniform": {64: scores_for(10, 4)}},
        "words": {"evolved": {64: scores_for(20, 10)}, "uniform": {64: scores_for(20, 10)}},
    }


def test_several_tasks_give_each_tasks_rows_and_the_weighted_overall(two_tasks):
    rows = compare_tasks(two_tasks, {"passkey": 3.0, "words": 1.0}, n_resamples=500)
    assert [r.task for r in rows][:2] == [OVERALL, OVERALL]
    by = {(r.task, r.method): r for r in rows}
    assert by[("passkey", "evolved")].score.mean == pytest.approx(0.8) and by[("passkey", "evolved")].score.n == 10
    assert by[("words", "uniform")].score.mean == pytest.approx(0.5) and by[("words", "uniform")].score.n == 20
    # overall = (3 * task mean + 1 * task mean) / 4, exactly the fitness's weighting
    assert by[(OVERALL, "evolved")].score.mean == pytest.approx((3 * 0.8 + 0.5) / 4)
    assert by[(OVERALL, "uniform")].score.mean == pytest.approx((3 * 0.4 + 0.5) / 4)
    assert by[(OVERALL, "evolved")].score.n == 30
    assert by[(OVERALL, "uniform")].versus.diff == pytest.approx(3 * 0.4 / 4)
    # each task's own paired test is the plain single-task one
    alone = compare_scores(two_tasks["passkey"], n_resamples=500)
    assert by[("passkey", "uniform")].versus == alone[1].versus


def test_a_multi_task_comparison_round_trips_and_renders_a_table_per_task(two_tasks, tmp_path, recipe):
    rows = compare_tasks(two_tasks, {"passkey": 1.0, "words": 1.0}, n_resamples=500)
    again, _ = load_comparison(save_comparison(rows, tmp_path / "comparison.json"))
    assert again == rows
    text = render_report(resolve_run(recipe), comparison=rows)
    assert "### Weighted overall" in text and "### Task passkey" in text and "### Task words" in text
    assert is_png(plot_score_vs_budget(rows, tmp_path / "score.png"))


def test_a_task_scored_on_different_instances_per_method_is_refused(two_tasks):
    two_tasks["words"]["uniform"][64] = scores_for(19, 10)
    with pytest.raises(ValueError, match="same instances"):
        compare_tasks(two_tasks, {"passkey": 1.0, "words": 1.0}, n_resamples=100)


def test_single_task_rows_keep_no_task_label(two_tasks):
    assert {r.task for r in compare_scores(two_tasks["passkey"], n_resamples=100)} == {None}
    assert np.isfinite([r.score.mean for r in compare_scores(two_tasks["words"], n_resamples=100)]).all()


def test_group_progress_counts_the_generations_of_each_group(climbing):
    assert [info.generations for info in group_progress(climbing)] == [3, 2]
