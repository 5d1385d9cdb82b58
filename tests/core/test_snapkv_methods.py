"""``uniform-snapkv`` and ``pyramid-snapkv``: the published SnapKV-ranked methods in a run that
ranks with another scorer (gates), equal to ``uniform``/``pyramid`` in a default SnapKV run."""

from __future__ import annotations

import numpy as np

from evolalloc.config.recipe import load_recipe
from evolalloc.core.baselines import make_baseline
from evolalloc.core.baselines.pyramid import pyramid_layer_budgets
from evolalloc.core.geometry import ModelGeometry
from evolalloc.pipeline.experiment import Experiment
from tests.pipeline.test_pipeline import tiny_recipe

GEOMETRY = ModelGeometry(num_layers=30, num_query_heads=9, num_kv_heads=3, head_dim=64, max_positions=8192)


def test_in_a_gates_run_they_rank_with_snapkv_and_shape_budgets_above_its_window():
    gates = {"checkpoint": "/somewhere/gates.pt"}
    uniform = make_baseline("uniform-snapkv").allocation(GEOMETRY, 64, scorer="gates", scorer_params=gates, reserved=20)
    assert (uniform.scorer, uniform.scorer_params) == ("snapkv", {})
    assert np.all(uniform.budgets == 64)
    pyramid = make_baseline("pyramid-snapkv").allocation(GEOMETRY, 64, scorer="gates", scorer_params=gates, reserved=20)
    assert pyramid.scorer == "snapkv" and pyramid.budgets.sum() == 64 * 30 * 3
    assert np.array_equal(pyramid.budgets[:, 0], pyramid_layer_budgets(30, 64, 20, reserved=32))  # not the gates' 20
    assert pyramid.budgets[-1, 0] >= 32  # the top layer still holds SnapKV's window


def test_in_a_default_snapkv_run_they_score_exactly_as_uniform_and_pyramid(tmp_path, tiny_model_dir):
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, scorer={"name": "snapkv"},
                                     budget={"target": 40, "expansions": []},
                                     baselines=["uniform", "pyramid", "uniform-snapkv", "pyramid-snapkv"]))
    with Experiment(recipe, progress=False) as experiment:
        scores = {}
        for name in recipe.baselines:
            allocation = experiment.baseline(name, 40)
            (result,) = experiment.evaluator("search", experiment.scorer_for(allocation)).evaluate([allocation.budgets])
            scores[name] = [o.score for o in result.instances]
    assert scores["uniform-snapkv"] == scores["uniform"] and scores["pyramid-snapkv"] == scores["pyramid"]
