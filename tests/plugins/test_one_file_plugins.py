"""Adding a baseline or an engine is one new file: the test-only ones in ``tests/plugins`` register
themselves on import and then run through a recipe, ``compare`` and an allocation file unchanged."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from evolalloc.config.recipe import recipe_from_dict
from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import load_allocation, save_allocation
from evolalloc.core.baselines import BASELINES, default_baselines
from evolalloc.engine.base import ENGINES
from evolalloc.pipeline.experiment import Experiment
from evolalloc.pipeline.run import compare


@pytest.fixture
def toy_plugins():
    """Register the toy baseline and engine (one import each) and forget them afterwards."""
    importlib.import_module("tests.plugins.toy_baseline")
    importlib.import_module("tests.plugins.toy_engine")
    yield
    BASELINES.remove("toy_inverted_pyramid")
    ENGINES.remove("toy_serial")


def recipe(model_dir, engine):
    return recipe_from_dict({
        "model": {"spec": str(model_dir)},
        "task": {"name": "passkey", "context_tokens": 200, "search": {"n": 1}, "heldout": {"n": 2}},
        "scorer": {"name": "snapkv", "params": {"window": 8}},
        "budget": {"target": 24, "expansions": []},
        "baselines": ["uniform", "toy_inverted_pyramid"],
        "engine": {"threads": 1, "batch_size": 8, **engine},
    })


def test_a_one_file_baseline_and_engine_run_through_compare_like_the_built_in_ones(toy_plugins, tiny_model_dir,
                                                                                   tmp_path):
    # the core defaults, then any other default rule (the input-adaptive methods are compositions, opt-in)
    assert default_baselines() == ["uniform", "pyramid", "streaming", "toy_inverted_pyramid"]
    toy = recipe(tiny_model_dir, {"kind": "toy_serial", "options": {"batch_size": 2}})
    with Experiment(toy, progress=False) as experiment:
        evolved = Allocation(model="m", geometry=experiment.geometry, scorer="snapkv", scorer_params={"window": 8},
                             target=24, budgets=np.full((4, 2), 24),
                             provenance={"method": "evolved"})
        rows, methods = compare(tmp_path, experiment, {24.0: evolved})
        engine = experiment.engine
        assert engine.evaluated == 3 and engine.batch_size == 2  # evolved, uniform, toy; options reached it
    assert engine.closed
    assert [row.method for row in rows] == ["evolved", "uniform", "toy_inverted_pyramid"]
    inverted = methods["toy_inverted_pyramid"][24.0]
    assert inverted.budgets[0, 0] < inverted.budgets[-1, 0] and inverted.total == 24 * 8
    # Its allocation file is valid (the schema's method enum comes from the registry).
    assert load_allocation(save_allocation(inverted,
                                           tmp_path / "toy.json")).provenance["method"] == "toy_inverted_pyramid"
    # The toy engine scores exactly as the local engine does.
    with Experiment(recipe(tiny_model_dir, {}), progress=False) as local:
        [expected] = local.evaluator("heldout").evaluate([inverted.budgets])
    assert [row for row in rows
            if row.method == "toy_inverted_pyramid"][0].score.mean == pytest.approx(expected.task_score)
