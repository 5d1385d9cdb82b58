"""benchmarks/expansion_floors.py: a finished run's profile expanded with floors of several sizes,
scored on more prompts of its search split than it was searched on; the held-out split untouched."""

from __future__ import annotations

import json

import pytest

from tests.pipeline.test_hybrid import TARGET, home  # noqa: F401 (home: a fixture)
from tests.pipeline.test_topup_run import topup_recipe
from tests.report.test_design_scores import benchmark_script


def script():
    return benchmark_script("expansion_floors")


def test_the_fractions_run_from_proportional_to_the_global_top_k():
    fractions = script().fractions(40.0, 64.0)
    assert fractions == pytest.approx({"prop": 1.0, "blend": 52 / 64, "topup": 40 / 64, "topup-half": 20 / 64,
                                       "global": 0.0})


def test_every_fraction_and_both_unsearched_rows_are_scored_and_zero_floors_are_the_global_gates(
        home, tiny_model_dir, tmp_path, monkeypatch):
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.run import search_run
    from evolalloc.pipeline.task_splits import TaskSplits

    recipe = topup_recipe(tiny_model_dir, rule="proportional")
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)
    before = sorted(p.name for p in run.iterdir())
    splits, instances = [], TaskSplits.instances
    monkeypatch.setattr(TaskSplits, "instances", lambda self, split: splits.append(split) or instances(self, split))
    out, work = tmp_path / "floors.json", tmp_path / "work"
    budget = 2 * TARGET
    assert script().main([str(run), "--budgets", str(budget), "--search-n", "3", "--work", str(work), "--out",
                          str(out)]) == 0
    scores = json.loads(out.read_text())
    labels = ("prop", "blend", "topup", "topup-half", "global")
    assert set(scores) == {f"uniform@{budget}", f"gates@{budget}"} | {f"{run.name}|{budget}|{label}"
                                                                      for label in labels}
    assert all(0.0 <= accuracy <= 1.0 for _, accuracy in scores.values())
    # Floors of zero leave everything to the one global top-k: the unsearched gates row, exactly.
    assert scores[f"{run.name}|{budget}|global"] == scores[f"gates@{budget}"]
    assert sorted(p.name for p in run.iterdir()) == before  # the run folder is only read
    assert splits and all(split.startswith("search") for split in splits)  # held-out prompts never drawn


def test_a_search_sample_of_zero_is_one_line_and_exit_2(tmp_path, capsys):
    assert script().main([str(tmp_path), "--budgets", "48", "--search-n", "0", "--work", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "--search-n" in err and len(err.strip().splitlines()) == 1
