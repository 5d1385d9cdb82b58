"""benchmarks/design_scores.py: every table row scored on one held-out prefill, on the tiny model."""

from __future__ import annotations

import json

from evolalloc.report.comparison import load_instance_scores
from tests.benchscripts import load_benchmark
from tests.pipeline.test_pipeline import tiny_recipe

benchmark_script = load_benchmark


def script():
    return benchmark_script("design_scores")


def test_a_profile_equal_to_uniform_snapkv_scores_exactly_its_instances_and_full_repeats_per_budget(tmp_path,
                                                                                                    tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.core.baselines import make_baseline
    from evolalloc.pipeline.experiment import Experiment

    recipe_path = tiny_recipe(tmp_path, tiny_model_dir)
    recipe = load_recipe(recipe_path)
    with Experiment(recipe, progress=False) as experiment:
        geometry = experiment.geometry
    run = tmp_path / "run-s0"
    run.mkdir()
    for budget in (40, 60):  # SnapKV's default window (32) fits inside both
        same = make_baseline("uniform").allocation(geometry, budget, model=recipe.model.spec, scorer="snapkv",
                                                   scorer_params={}, reserved=32)
        save_allocation(same, run / f"allocation-c{budget}.json")
    out = tmp_path / "scores.json"
    assert script().main([str(recipe_path), "--run", f"copy-s0={run}", "--out", str(out), "--work",
                          str(tmp_path / "w")]) == 0
    (scores,) = load_instance_scores(out).values()
    assert set(scores) == {"full", "uniform", "pyramid", "copy-s0"}
    assert set(scores["copy-s0"]) == {40.0, 60.0} == set(scores["pyramid"])
    assert scores["copy-s0"] == scores["uniform"]  # same budgets, same scorer: the same answers
    assert scores["full"][40.0] == scores["full"][60.0] and len(scores["full"][40.0]) == 3  # heldout n = 3
    assert json.loads(out.read_text())["meta"]["split"] == "heldout"


def test_a_run_folder_without_profiles_is_one_line_and_exit_2(tmp_path, tiny_model_dir, capsys):
    (tmp_path / "empty").mkdir()
    code = script().main([str(tiny_recipe(tmp_path, tiny_model_dir)), "--run", f"x-s0={tmp_path / 'empty'}",
                          "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert (
        code == 2
        and "no allocation-c*.json" in err
        and str(tmp_path / "empty") in err
        and len(err.strip().splitlines()) == 1
    )
    assert not (tmp_path / "o.json").exists()


def test_the_uniform_floors_row_needs_the_gates_it_reads(tmp_path, tiny_model_dir, capsys):
    code = script().main([str(tiny_recipe(tmp_path, tiny_model_dir)), "--floors", "0.5", "--out",
                          str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == 2 and "--floors" in err and "--gates-from" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.json").exists()


def test_at_snapkvs_window_the_pyramid_cell_is_left_empty_not_refused(tmp_path, tiny_model_dir, capsys):
    """c = 32 is SnapKV's whole window: uniform SnapKV exists there (the window only), the pyramid
    above the window does not; the run's other budget still gets every row."""
    from evolalloc.config.recipe import load_recipe
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.core.baselines import make_baseline
    from evolalloc.pipeline.experiment import Experiment

    recipe_path = tiny_recipe(tmp_path, tiny_model_dir)
    with Experiment(load_recipe(recipe_path), progress=False) as experiment:
        geometry = experiment.geometry
    run = tmp_path / "run-s0"
    run.mkdir()
    for budget in (32, 40):
        same = make_baseline("uniform").allocation(geometry, budget, model="tiny", scorer="snapkv", scorer_params={},
                                                   reserved=32)
        save_allocation(same, run / f"allocation-c{budget}.json")
    out = tmp_path / "scores.json"
    assert script().main([str(recipe_path), "--run", f"copy-s0={run}", "--out", str(out)]) == 0
    assert "pyramid: not scored at c = 32" in capsys.readouterr().out
    (scores,) = load_instance_scores(out).values()
    assert set(scores["pyramid"]) == {40.0} and set(scores["uniform"]) == set(scores["copy-s0"]) == {32.0, 40.0}
    assert scores["copy-s0"] == scores["uniform"]
