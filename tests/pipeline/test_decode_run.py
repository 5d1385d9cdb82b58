"""A run with ``budget.decode`` searches, compares and ships its profile held while decoding."""

from __future__ import annotations

import pytest

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


def test_evaluate_scores_a_held_profile_only_under_the_same_decode_setting(tmp_path, tiny_model_dir):
    import numpy as np

    from evolalloc.config.recipe import load_recipe
    from evolalloc.core.allocation import Allocation
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.core.errors import UserError
    from evolalloc.pipeline.evaluate import evaluate_allocations
    from evolalloc.runtime.model import load_model

    geometry = load_model(str(tiny_model_dir)).geometry
    profile = save_allocation(Allocation(model="tiny", geometry=geometry, target=24, scorer="snapkv",
                                         scorer_params={"window": 8}, budgets=np.full((4, 2), 24),
                                         provenance={"method": "uniform"}, decode=DecodeEviction(2)),
                              tmp_path / "held.json")
    prompt_only = load_recipe(tiny_recipe(tmp_path, tiny_model_dir))
    with pytest.raises(UserError, match="held while decoding every 2 tokens, the recipe's evaluations are "
                                        "prompt-only") as err:
        list(evaluate_allocations(prompt_only, [str(profile)], progress=False))
    assert err.value.field == "$.decode"
    held = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, budget={"target": 24, "decode": {"interval": 2}}))
    (evaluated,) = evaluate_allocations(held, [str(profile)], progress=False)
    assert evaluated.result.ok
