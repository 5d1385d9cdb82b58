"""The input-adaptive methods take part in `compare` like the baselines, with per-instance scores."""

from __future__ import annotations

import numpy as np

from evolalloc.config.recipe import recipe_from_dict
from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import load_allocation, save_allocation
from evolalloc.core.baselines import default_baselines, methods
from evolalloc.pipeline.experiment import Experiment
from evolalloc.pipeline.run import compare
from evolalloc.runtime.adaptive import Adapted

ADAPTIVE = ["uniform+adakv", "pyramid+adakv", "evolved+adakv", "cake"]


def recipe(model_dir, baselines):
    return recipe_from_dict({
        "model": {"spec": str(model_dir)},
        "task": {"name": "passkey", "context_tokens": 200, "search": {"n": 1}, "heldout": {"n": 3}},
        "scorer": {"name": "snapkv", "params": {"window": 8}},
        "budget": {"target": 24, "expansions": [48]},
        "baselines": baselines,
        "engine": {"threads": 1, "batch_size": 8},
    })


def test_the_adaptive_methods_are_opt_in_methods_an_allocation_file_may_name():
    assert set(ADAPTIVE + ["global-topk"]) <= set(methods())
    assert not set(ADAPTIVE + ["global-topk"]) & set(default_baselines())


def test_compare_scores_every_adaptive_method_at_every_budget_per_instance(tiny_model_dir, tmp_path):
    run = recipe(tiny_model_dir, ["uniform", *ADAPTIVE])
    with Experiment(run, progress=False) as experiment:
        evolved = {b: Allocation(model="m", geometry=experiment.geometry, scorer="snapkv", scorer_params={"window": 8},
                                 target=b, budgets=np.tile(np.array([[b - 8], [b + 8], [b - 8], [b + 8]]), (1, 2)),
                                 provenance={"method": "evolved"}) for b in (24.0, 48.0)}
        rows, chosen = compare(tmp_path, experiment, evolved)
        assert isinstance(experiment.scorer_for(chosen["uniform+adakv"][24.0]), Adapted)
        assert not isinstance(experiment.scorer_for(chosen["uniform"][24.0]), Adapted)
    assert {(row.method, row.budget) for row in rows} == {(m, b) for m in ["evolved", "uniform", *ADAPTIVE]
                                                          for b in (24.0, 48.0)}
    assert all(row.score.n == 3 for row in rows)
    assert all(row.versus is not None for row in rows if row.method != "evolved")  # paired with evolved
    # evolved+adakv starts from the searched profile at each budget; its file is valid.
    adapted = chosen["evolved+adakv"][48.0]
    assert (adapted.budgets == evolved[48.0].budgets).all()
    assert load_allocation(save_allocation(adapted, tmp_path / "a.json")).provenance["method"] == "evolved+adakv"


def test_compare_runs_global_topk_from_the_default_checkpoint_by_its_old_name_too(tiny_model_dir, tmp_path,
                                                                                  monkeypatch):
    import torch

    from evolalloc.runtime.gates import GatesConfig, RetentionGates, save_gates
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.policy import model_identity

    monkeypatch.setenv("HOME", str(tmp_path))  # the default checkpoint is under ~/.cache/evolalloc/gates
    loaded = load_model(str(tiny_model_dir))
    torch.manual_seed(0)
    save_gates(tmp_path / ".cache/evolalloc/gates/gates.pt", RetentionGates(GatesConfig(4, 2, 16, hidden=4)),
               model=model_identity("tiny", loaded.model), geometry=loaded.geometry.to_dict(), training={})
    run = recipe(tiny_model_dir, ["uniform", "gates"])  # global-topk by its old name: its rows are written as before
    with Experiment(run, progress=False) as experiment:
        assert "gates" in [s.name for s in experiment.scorers]  # its records hold the gates' ranking and scores
        evolved = {24.0: Allocation(model="m", geometry=experiment.geometry, scorer="snapkv",
                                    scorer_params={"window": 8},
                                    target=24, budgets=np.full((4, 2), 24), provenance={"method": "evolved"})}
        (tmp_path / "run").mkdir()
        rows, chosen = compare(tmp_path / "run", experiment, evolved)
        gates = chosen["gates"][24.0]
        assert gates.scorer == "gates" and gates.total == 24 * 4 * 2
        record = experiment.records("heldout")[0]
        budgets = experiment.scorer_for(gates).adapt(record, gates.budgets)
        assert budgets.sum() == 24 * 4 * 2
    assert [row.method for row in rows] == ["evolved", "uniform", "gates"] and all(row.score.n == 3 for row in rows)


def test_compare_baselines_option_refuses_an_unknown_method_in_one_line(tmp_path):
    from evolalloc.config.run_folder import create_run_folder
    from tests.clitools import run_cli

    folder = create_run_folder(recipe("bundled:smollm2-135m-instruct", ["uniform"]), tmp_path / "runs")
    result = run_cli("compare", str(folder), "--baselines", "uniform,pyramid+adakvv")
    assert result.code == 2 and len(result.error_lines) == 1
    assert "pyramid+adakv" in result.stderr and "--baselines" in result.stderr


def test_compare_baselines_option_takes_compositions_under_their_one_label():
    from evolalloc.cli.search_cmds import _baseline_list

    assert _baseline_list("uniform, uniform+cake ,pyramid+cake") == ["uniform", "cake", "pyramid+cake"]


def test_a_recipe_naming_gates_without_a_checkpoint_is_refused_saying_how_to_train_one(tmp_path, monkeypatch):
    import pytest

    from evolalloc.core.errors import UserError

    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(UserError, match="evolalloc gates train") as caught:
        recipe("bundled:smollm2-135m-instruct", ["uniform", "gates"])
    assert caught.value.field == "baselines[1]"
