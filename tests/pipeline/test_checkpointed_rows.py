"""A run whose own scorer is SnapKV compares rows that rank with a trained scorer's checkpoint named in
the recipe (``checkpoints``): the uniform x retention-gates composition and global-topk, on the same
held-out records as every other row (one prefill)."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.config.recipe import recipe_from_dict
from evolalloc.core.allocation import Allocation
from evolalloc.core.baselines import make_baseline, reading_checkpoints
from evolalloc.core.composition import Composition, parse_label
from evolalloc.core.errors import UserError
from evolalloc.pipeline.experiment import Experiment
from evolalloc.pipeline.run import compare

GATES_ROW = "uniform-retention-gates"


def recipe(model_dir, baselines, checkpoints=None, scorer=None):
    return recipe_from_dict({
        "model": {"spec": str(model_dir)},
        "task": {"name": "passkey", "context_tokens": 200, "search": {"n": 1}, "heldout": {"n": 3}},
        "scorer": scorer or {"name": "snapkv", "params": {"window": 8}},
        "budget": {"target": 24},
        "baselines": baselines,
        "checkpoints": checkpoints or {},
        "engine": {"threads": 1, "batch_size": 8},
    })


@pytest.fixture
def gates_file(tiny_model_dir, tmp_path, monkeypatch):
    """Gates for the tiny model at a path of their own; the default checkpoint (under HOME) is absent."""
    import torch

    from evolalloc.runtime.gates import GatesConfig, RetentionGates, save_gates
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.policy import model_identity

    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "cache"))  # no default checkpoint there
    loaded = load_model(str(tiny_model_dir))
    torch.manual_seed(0)
    path = tmp_path / "elsewhere" / "gates.pt"
    save_gates(path, RetentionGates(GatesConfig(4, 2, 16, hidden=4)),
               model=model_identity("tiny", loaded.model), geometry=loaded.geometry.to_dict(), training={})
    return path


def test_a_composition_may_rank_with_the_retention_gates_and_its_label_reads_back():
    assert parse_label(GATES_ROW) == Composition("uniform", scorer="retention-gates")
    assert make_baseline(GATES_ROW).scorer == ("retention-gates", {})


def test_the_gates_rows_read_the_recipe_s_checkpoint_else_the_run_scorer_s():
    named = reading_checkpoints(GATES_ROW, {"retention-gates": "/g.pt"})
    assert named.scorer == ("retention-gates", {"checkpoint": "/g.pt"})
    assert reading_checkpoints("global-topk", {"gates": "/g.pt"}).scorer[1]["checkpoint"] == "/g.pt"  # old name
    run = ("retention-gates", {"checkpoint": "/run.pt", "sinks": 0, "window": 32})
    assert reading_checkpoints("global-topk", None, run).scorer == ("retention-gates", {"checkpoint": "/run.pt",
                                                                                     "sinks": 0, "window": 32})
    assert reading_checkpoints(GATES_ROW, None, run).scorer[1] == run[1]
    # the row's budgets hold the run's always-kept tokens, not the gates' defaults (4 + 16)
    assert reading_checkpoints(GATES_ROW, None, run).min_target == 32
    assert reading_checkpoints(GATES_ROW, {"retention-gates": "/g.pt"}).min_target == 20
    # a run scoring with the gates by their old name: the row ranks with the run's very scorer (one ranking)
    old = ("gates", {"checkpoint": "/run.pt", "sinks": 4, "window": 16, "horizon": 64})
    assert reading_checkpoints(GATES_ROW, None, old).scorer == old


def test_compare_baselines_leaves_a_trained_scorer_s_checkpoint_to_the_run_s_recipe(tmp_path, monkeypatch):
    from evolalloc.cli.search_cmds import _baseline_list

    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path))  # no default checkpoint: the run's recipe may name one
    assert _baseline_list(f"uniform,{GATES_ROW},global-topk") == ["uniform", GATES_ROW, "global-topk"]


def test_a_snapkv_run_scores_both_gates_rows_on_its_one_prefill(tiny_model_dir, tmp_path, gates_file):
    run = recipe(tiny_model_dir, ["uniform", {"allocation": "uniform", "scorer": "retention-gates"}, "global-topk"],
                 {"retention-gates": str(gates_file)})
    assert run.baselines == ["uniform", GATES_ROW, "global-topk"]
    with Experiment(run, progress=False) as experiment:
        ranked = {scorer.name: scorer for scorer in experiment.scorers}
        assert len(experiment.scorers) == 2 and set(ranked) == {"snapkv", "retention-gates"}  # each record: both
        assert ranked["retention-gates"].checkpoint == str(gates_file)
        evolved = {24.0: Allocation(model="m", geometry=experiment.geometry, scorer="snapkv",
                                    scorer_params={"window": 8}, target=24, budgets=np.full((4, 2), 24),
                                    provenance={"method": "evolved"})}
        (tmp_path / "run").mkdir()
        rows, chosen = compare(tmp_path / "run", experiment, evolved)
        for method in (GATES_ROW, "global-topk"):
            allocation = chosen[method][24.0]
            assert allocation.scorer == "retention-gates"
            assert allocation.scorer_params["checkpoint"] == str(gates_file)
            assert allocation.provenance["scorer_checkpoint"]["path"] == str(gates_file)
        for method in (GATES_ROW, "global-topk"):  # each ranks with what the records were ranked with
            assert experiment.scorer_for(chosen[method][24.0]).key == ranked["retention-gates"].key
        assert chosen[GATES_ROW][24.0].provenance["composition"] == {"allocation": "uniform",
                                                                      "scorer": "retention-gates", "adapter": None}
        assert (chosen[GATES_ROW][24.0].budgets == chosen["uniform"][24.0].budgets).all()
    assert [row.method for row in rows] == ["evolved", "uniform", GATES_ROW, "global-topk"]
    assert all(row.score.n == 3 for row in rows)


def test_a_checkpoint_is_kept_as_an_absolute_path(tiny_model_dir, gates_file, monkeypatch):
    monkeypatch.chdir(gates_file.parent)
    run = recipe(tiny_model_dir, ["uniform", GATES_ROW], {"retention-gates": gates_file.name})
    assert run.checkpoints == {"retention-gates": str(gates_file)}


@pytest.mark.parametrize(("checkpoints", "scorer", "field", "says"), [
    ({"retention-gates": "GATES", "gates": "GATES"}, None, "checkpoints.gates", "named twice"),
    ({"snapkv": "x.pt"}, None, "checkpoints.snapkv", "not a trained scorer"),
    ({"retention-gates": "missing.pt"}, None, "checkpoints.retention-gates", "no file at /.*missing.pt"),
    ({"retention-gates": "GATES"}, {"name": "retention-gates", "params": {"checkpoint": "GATES"}},
     "checkpoints.retention-gates", "the run's scorer is retention-gates"),
    ({}, None, "baselines[1]", "name one under the recipe's checkpoints"),
])
def test_a_bad_checkpoints_section_is_refused_naming_the_field(tiny_model_dir, gates_file, checkpoints, scorer,
                                                              field, says):
    fill = {key: str(gates_file) if value == "GATES" else value for key, value in checkpoints.items()}
    if scorer is not None:
        scorer = {**scorer, "params": {"checkpoint": str(gates_file)}}
    with pytest.raises(UserError, match=says) as caught:
        recipe(tiny_model_dir, ["uniform", GATES_ROW], fill, scorer)
    assert caught.value.field == field
