"""benchmarks/search_split_scores.py: every run profile scored on other search-split prompts, never on
the held-out split (issue 35's item 2 chooses with it), on the tiny model."""

from __future__ import annotations

import json

from evolalloc.report.comparison import load_instance_scores
from tests.pipeline.test_pipeline import tiny_recipe
from tests.report.test_design_scores import benchmark_script


def script():
    return benchmark_script("search_split_scores")


def copies_of_uniform(tmp_path, recipe_path, budgets=(40, 60)):
    """A run folder whose profiles are uniform SnapKV at ``budgets`` (what the script must score like uniform)."""
    from evolalloc.config.recipe import load_recipe
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.core.baselines import make_baseline
    from evolalloc.pipeline.experiment import Experiment

    with Experiment(load_recipe(recipe_path), progress=False) as experiment:
        geometry = experiment.geometry
    run = tmp_path / "run-s0"
    run.mkdir()
    for budget in budgets:
        same = make_baseline("uniform").allocation(geometry, budget, model="tiny", scorer="snapkv", scorer_params={},
                                                   reserved=32)
        save_allocation(same, run / f"allocation-c{budget}.json")
    return run


def test_every_profile_of_a_run_is_scored_at_its_budget_on_n_search_prompts_like_uniform(tmp_path, tiny_model_dir):
    recipe_path = tiny_recipe(tmp_path, tiny_model_dir)
    run = copies_of_uniform(tmp_path, recipe_path)
    out = tmp_path / "item2.json"
    assert script().main([str(recipe_path), "--run", f"E-s0={run}", "--seed", "77", "--n", "4", "--out", str(out)]) == 0
    (scores,) = load_instance_scores(out).values()
    assert set(scores) == {"full", "uniform", "E-s0"}
    assert set(scores["E-s0"]) == {40.0, 60.0} and scores["E-s0"] == scores["uniform"]
    assert len(scores["full"][40.0]) == 4  # --n prompts, uncurated
    meta = json.loads(out.read_text())["meta"]
    assert meta["split"] == "search" and meta["instance seed"] == 77


def test_the_held_out_split_is_never_drawn(tmp_path, tiny_model_dir, monkeypatch):
    from evolalloc.pipeline.task_splits import TaskSplits

    drawn = []
    original = TaskSplits.instances
    monkeypatch.setattr(TaskSplits, "instances", lambda self, split: drawn.append(split) or original(self, split))
    recipe_path = tiny_recipe(tmp_path, tiny_model_dir)
    run = copies_of_uniform(tmp_path, recipe_path, budgets=(40,))
    assert script().main([str(recipe_path), "--run", f"E-s0={run}", "--seed", "5", "--n", "2", "--out",
                          str(tmp_path / "o.json")]) == 0
    assert drawn and not any(split.startswith("heldout") for split in drawn)


def test_a_run_folder_without_profiles_is_one_line_and_exit_2(tmp_path, tiny_model_dir, capsys):
    (tmp_path / "empty").mkdir()
    code = script().main([str(tiny_recipe(tmp_path, tiny_model_dir)), "--run", f"x-s0={tmp_path / 'empty'}", "--seed",
                          "1",
                          "--n", "2", "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == 2 and "no allocation-c*.json" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.json").exists()
