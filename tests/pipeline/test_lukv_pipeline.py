"""LU-KV in a run (pipeline/lukv.py): profiled on the search split, saved in the run folder, compared
at every budget like the other baselines, and its allocation file loads like theirs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.config.recipe import recipe_from_dict
from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import load_allocation, save_allocation
from evolalloc.core.baselines.lukv import CURVES_FILE, UtilityCurves
from evolalloc.core.errors import UserError
from evolalloc.pipeline.experiment import Experiment
from evolalloc.pipeline.lukv import future_attention, instance_curves
from evolalloc.pipeline.run import compare


def recipe(model_dir, **scorer):
    return recipe_from_dict({
        "model": {"spec": str(model_dir)},
        "task": {"name": "passkey", "context_tokens": 200, "search": {"n": 2}, "heldout": {"n": 2}},
        "scorer": {"name": "snapkv", "params": {"window": 8, **scorer}},
        "budget": {"target": 24, "expansions": [48]},
        "baselines": ["uniform", "lukv"],
        "engine": {"threads": 1, "batch_size": 8},
    })


def test_instance_curves_sum_the_attention_of_the_top_ranked_positions():
    attention = torch.tensor([[[0.1, 0.5, 0.2, 0.0]]])  # [1 layer, 1 head, L = 4]
    ranking = torch.tensor([[[1, 2, 0, 3]]])
    assert instance_curves(attention, ranking)[0, 0].tolist() == pytest.approx([0, 0.5, 0.7, 0.8, 0.8])


def test_future_attention_is_each_groups_mean_attention_of_the_future_queries(tiny_model_dir):
    from evolalloc.runtime.model import load_model

    loaded = load_model(str(tiny_model_dir))
    context, future = list(range(5, 25)), [30, 31, 32]
    attention = future_attention(loaded.model, context, future)
    g = loaded.geometry
    assert attention.shape == (g.num_layers, g.num_kv_heads, len(context))
    # Each future query's row sums to 1 over context + future: the context gets part of it.
    total = attention.sum(dim=-1)
    assert torch.all(total > 0) and torch.all(total <= 1 + 1e-5)


def test_lukv_is_profiled_once_saved_in_the_run_folder_and_compared_at_every_budget(tiny_model_dir, tmp_path):
    run = recipe(tiny_model_dir)
    with Experiment(run, progress=False, run_dir=tmp_path) as experiment:
        g = experiment.geometry
        evolved = {c: Allocation(model="m", geometry=g, scorer="snapkv", scorer_params={"window": 8}, target=c,
                                 budgets=np.full((g.num_layers, g.num_kv_heads), int(c)),
                                 provenance={"method": "evolved"})
                   for c in (24.0, 48.0)}
        rows, methods = compare(tmp_path, experiment, evolved)
        curves = experiment.run.methods.lukv_curves()
    assert (tmp_path / CURVES_FILE).is_file()
    saved = UtilityCurves.load(tmp_path / CURVES_FILE)
    assert np.array_equal(saved.utility, curves.utility) and saved.meta["instances"] == 2 and saved.floor == 8
    assert np.all(np.diff(saved.utility, axis=2) >= -1e-9)  # utility never falls as the budget grows
    assert {(row.method, row.budget) for row in rows} >= {("lukv", 24.0), ("lukv", 48.0)}
    for c, allocation in methods["lukv"].items():
        assert allocation.total == round(c * g.num_layers * g.num_kv_heads) and allocation.budgets.min() >= 8
        assert np.array_equal(allocation.budgets, saved.budgets(allocation.total))
        assert load_allocation(save_allocation(allocation,
                                               tmp_path / f"lukv-{c:g}.json")).provenance["method"] == "lukv"
    # One set of curves for every budget: no head loses tokens from c = 24 to c = 48.
    assert np.all(methods["lukv"][48.0].budgets >= methods["lukv"][24.0].budgets)


def test_curves_of_another_scorer_are_refused_with_the_file_named(tiny_model_dir, tmp_path):
    with Experiment(recipe(tiny_model_dir), progress=False, run_dir=tmp_path) as experiment:
        experiment.run.methods.lukv_curves()
    with Experiment(recipe(tiny_model_dir, kernel=5), progress=False, run_dir=tmp_path) as experiment:
        with pytest.raises(UserError, match=f"{CURVES_FILE}: meta.scorer"):
            experiment.baseline("lukv", 24)


def test_curves_profiled_on_bounded_records_are_the_curves_of_whole_records(tiny_model_dir):
    """The search records are bounded at b_max (their rankings index b_max slots, not positions):
    profiling on them must give the curves whole records give, up to the longest prompt."""
    from evolalloc.pipeline.experiment import _profiled_run
    from evolalloc.pipeline.lukv import profile_curves

    run = recipe(tiny_model_dir)
    with Experiment(run, progress=False) as bounded:
        assert bounded.record_policy.bound is not None  # b_max known without profiling lukv first
        assert any(r.bound is not None for r in bounded.records("search"))
        got = profile_curves(_profiled_run(bounded))
    with Experiment(recipe(tiny_model_dir), progress=False, bounded=False) as whole:
        want = profile_curves(_profiled_run(whole))
    assert got.utility.shape == want.utility.shape
    assert np.allclose(got.utility, want.utility, atol=1e-6)
