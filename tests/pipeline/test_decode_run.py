"""A run with ``budget.decode`` searches, compares and ships its profile held while decoding."""

from __future__ import annotations

from evolalloc.core.allocation_file import load_allocation
from evolalloc.core.decode_eviction import DecodeEviction
from tests.pipeline.test_pipeline import tiny_recipe


def test_a_run_with_budget_decode_ships_profiles_that_hold_their_budgets_while_decoding(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import create_run_folder, load_resolved
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.pipeline.run import search_run

    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, budget={"target": 24, "expansions": [48],
                                                                       "decode": {"interval": 2}},
                                     optimizer={"name": "cma", "generations_per_group": 1}))
    with Experiment(recipe, progress=False) as experiment:  # the engine's evaluators hold it
        assert experiment.evaluator("search").decode == DecodeEviction(2)
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)
    assert load_resolved(run).decode == DecodeEviction(2)
    for name in ("allocation-c24.json", "allocation-c48.json"):
        assert load_allocation(run / name).decode == DecodeEviction(2), name
    assert "| held while decoding | every 2 generated tokens" in (run / "report.md").read_text()
