"""The hybrid (gates + a searched prior) through the unchanged group-wise loop: a recipe searches it,
the run ships a file recording the prior, and evaluate / compare / generate run that file as searched."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evolalloc.config.recipe import recipe_from_dict
from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import load_allocation, save_allocation
from evolalloc.core.errors import UserError
from evolalloc.pipeline.experiment import Experiment
from evolalloc.runtime.adaptive import Adapted
from tests.clitools import run_cli

TARGET = 32


@pytest.fixture
def home(tmp_path, tiny_model_dir, monkeypatch) -> Path:
    """A HOME whose default gates checkpoint (the recipe's and the ``gates`` method's) fits the tiny model."""
    import torch

    from evolalloc.runtime.gates import GatesConfig, RetentionGates, save_gates
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.policy import model_identity

    monkeypatch.setenv("HOME", str(tmp_path))
    loaded = load_model(str(tiny_model_dir))
    torch.manual_seed(0)
    gates = RetentionGates(GatesConfig(4, 2, 16, hidden=4))
    with torch.no_grad():  # a spread of retentions, so the global ranking is not flat
        gates.shared.weight.normal_(0, 3.0)
    save_gates(tmp_path / ".cache/evolalloc/gates/gates.pt", gates, model=model_identity("tiny", loaded.model),
               geometry=loaded.geometry.to_dict(), training={})
    return tmp_path


def hybrid_recipe(model_dir, **changes):
    data = {
        "name": "hybrid",
        "model": {"spec": str(model_dir)},
        "task": {"name": "passkey", "context_tokens": 200, "search": {"n": 2}, "heldout": {"n": 3}},
        "scorer": {"name": "gates"},
        "budget": {"target": TARGET, "expansions": [2 * TARGET]},
        "search_space": {"name": "gate_prior", "group_size": 4},
        "optimizer": {"name": "cma", "generations_per_group": 1, "popsize": 4},
        "baselines": ["gates"],
        "engine": {"threads": 1, "batch_size": 8},
        "seed": 0,
    }
    data.update(changes)
    return recipe_from_dict(data)


def likelihood(experiment, allocation, scorer=None) -> float:
    """The held-out mean log-likelihood of the references: moves with every kept token."""
    (result,) = experiment.evaluator("heldout", scorer or experiment.scorer_for(allocation),
                                     mode="likelihood").evaluate(
        [allocation.budgets])
    assert result.ok, result.error
    return result.task_score


def test_at_zero_prior_the_hybrid_scores_exactly_as_the_global_gates(home, tiny_model_dir):
    with Experiment(hybrid_recipe(tiny_model_dir), progress=False) as experiment:
        gates = experiment.baseline("gates", TARGET)
        hybrid = Allocation(model="m", geometry=experiment.geometry, scorer="gates", scorer_params=gates.scorer_params,
                            target=TARGET, budgets=np.full((4, 2), TARGET),
                            provenance={"method": "evolved", "adapter": "gate_prior"})
        plain = experiment.evaluator("heldout", experiment.scorer_for(gates)).evaluate([gates.budgets])[0]
        shifted = experiment.evaluator("heldout", experiment.scorer_for(hybrid)).evaluate([hybrid.budgets])[0]
        assert [(o.prediction, o.score) for o in shifted.instances] == [(o.prediction, o.score)
                                                                        for o in plain.instances]
        assert likelihood(experiment, hybrid) == likelihood(experiment, gates)
        # ...and a non-zero prior is not: the adapter really reads the budgets
        tilted = Allocation(model="m", geometry=experiment.geometry, scorer="gates", scorer_params=gates.scorer_params,
                            target=TARGET, budgets=np.array([[20] * 2, [20] * 2, [20] * 2, [68] * 2]),
                            provenance={"method": "evolved", "adapter": "gate_prior"})
        assert likelihood(experiment, tilted) != likelihood(experiment, gates)


def test_a_hybrid_run_ships_its_prior_and_evaluate_reproduces_its_score_from_the_file(home, tiny_model_dir, tmp_path):
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.run import search_run

    recipe = hybrid_recipe(tiny_model_dir)
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)
    shipped = load_allocation(run / f"allocation-c{TARGET}.json")
    assert shipped.provenance["adapter"] == "gate_prior" and shipped.scorer == "gates"
    assert shipped.total == TARGET * 4 * 2
    written = json.loads((run / f"allocation-c{TARGET}.json").read_text())["provenance"]["prior"]
    assert np.allclose(written, np.log(shipped.budgets / shipped.budgets.mean()), atol=1e-4)
    assert load_allocation(run / f"allocation-c{2 * TARGET}.json").provenance["adapter"] == "gate_prior"
    comparison = json.loads((run / "comparison.json").read_text())
    assert {row["method"] for row in comparison["rows"]} == {"evolved", "gates"}

    scored = run_cli("evaluate", str(run / f"allocation-c{TARGET}.json"), "--run", str(run), "--quiet", "--no-progress")
    assert scored.code == 0, scored.stderr
    evolved = next(row for row in comparison["rows"] if row["method"] == "evolved" and row["budget"] == TARGET)
    assert f"mean {evolved['score']['mean']:.3f}" in scored.stdout

    recipe = hybrid_recipe(tiny_model_dir)
    with Experiment(recipe, progress=False) as experiment:
        scorer = experiment.scorer_for(shipped)
        assert isinstance(scorer, Adapted) and scorer.adapter.name == "score_prior"  # gate_prior, renamed
        in_memory = Allocation(model=shipped.model, geometry=shipped.geometry, scorer=shipped.scorer,
                               scorer_params=shipped.scorer_params, target=TARGET, budgets=shipped.budgets.copy(),
                               provenance={"method": "evolved", "adapter": "gate_prior"})
        assert likelihood(experiment, shipped) == likelihood(experiment, in_memory)
        from evolalloc.runtime.generation import resolve_profile

        _, generating, _ = resolve_profile(run / f"allocation-c{TARGET}.json", experiment.loaded.model, None)
        # generate runs it as searched
        assert isinstance(generating, Adapted) and generating.adapter.name == "score_prior"

    prompt = tmp_path / "prompts.jsonl"
    prompt.write_text(json.dumps({"prompt": "The pass key is 12345. Remember it. " * 8 + "The pass key is"}) + "\n")
    generated = run_cli("generate", "--allocation", str(run / f"allocation-c{TARGET}.json"), "--model",
                        str(tiny_model_dir),
                        "--prompt-file", str(prompt), "--max-new-tokens", "4")
    assert generated.code == 0, generated.stderr


@pytest.mark.parametrize("optimizer", ["cma", "random", "optuna-tpe"])
def test_every_optimizer_searches_the_prior_at_the_exact_total(home, tiny_model_dir, tmp_path, optimizer):
    from evolalloc.search import run_search

    recipe = hybrid_recipe(tiny_model_dir, optimizer={"name": optimizer, "generations_per_group": 1, "popsize": 4},
                           task={"name": "passkey", "context_tokens": 200, "search": {"n": 1}, "heldout": {"n": 1}})
    with Experiment(recipe, progress=False) as experiment:
        assert isinstance(experiment.search_scorer, Adapted)
        result = run_search(tmp_path / optimizer, experiment.search_evaluator(), experiment.search_config,
                            progress=False)
    assert len(result.history) == 4 and all(trial.state == "COMPLETE" for trial in result.history)
    assert all(np.asarray(trial.budgets).sum() == TARGET * 4 * 2 for trial in result.history)
    assert all(trial.cache_score == 1.0 for trial in result.history)  # memory is never what a candidate trades
    assert len({tuple(np.asarray(trial.budgets).ravel()) for trial in result.history}) > 1


def test_a_recipe_pairing_the_hybrid_with_another_scorer_is_refused_in_one_line(home, tiny_model_dir, tmp_path):
    with pytest.raises(UserError) as caught:
        hybrid_recipe(tiny_model_dir, scorer={"name": "snapkv"})
    assert caught.value.field == "search_space.name" and "gates" in str(caught.value)
    path = tmp_path / "r.yaml"
    import yaml

    path.write_text(yaml.safe_dump({**hybrid_recipe(tiny_model_dir).to_dict(),
                                    "scorer": {"name": "snapkv", "params": {}}}))
    refused = run_cli("search", str(path), "--runs-dir", str(tmp_path / "runs"))
    assert refused.code == 2 and len(refused.error_lines) == 1 and "search_space.name" in refused.stderr
    assert not (tmp_path / "runs").exists()
    with pytest.raises(UserError) as caught:  # its budgets are a prior, not budgets AdaKV could share out
        hybrid_recipe(tiny_model_dir, baselines=["gates", "evolved+adakv"])
    assert caught.value.field == "baselines[1]" and "gate_prior" in str(caught.value)


def test_a_hybrid_file_whose_prior_was_edited_or_whose_scorer_is_not_gates_is_refused(home, tiny_model_dir, tmp_path):
    from evolalloc.runtime.model import load_model

    geometry = load_model(str(tiny_model_dir)).geometry
    hybrid = Allocation(model="m", geometry=geometry, scorer="gates", target=TARGET,
                        budgets=np.array([[20] * 2, [30] * 2, [40] * 2, [38] * 2]),
                        provenance={"method": "evolved", "adapter": "gate_prior"})
    path = save_allocation(hybrid, tmp_path / "h.json")
    data = json.loads(path.read_text())
    assert len(data["provenance"]["prior"]) == 4
    data["provenance"]["prior"][0][0] += 0.5
    path.write_text(json.dumps(data))
    with pytest.raises(UserError) as caught:
        load_allocation(path)
    assert caught.value.field == "$.provenance.prior"

    snap = Allocation(model="m", geometry=geometry, scorer="snapkv", target=TARGET, budgets=hybrid.budgets,
                      provenance={"method": "evolved", "adapter": "gate_prior"})
    refused = run_cli("evaluate", str(save_allocation(snap, tmp_path / "s.json")), "--recipe",
                      str(_recipe_file(tiny_model_dir, tmp_path)), "--no-progress")
    assert refused.code == 2 and len(refused.error_lines) == 1 and "gates" in refused.stderr


def _recipe_file(model_dir, tmp_path) -> Path:
    import yaml

    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump({"model": {"spec": str(model_dir)},
                                    "task": {"name": "passkey", "context_tokens": 200,
                                    "search": {"n": 1}, "heldout": {"n": 1}}, "budget": {"target": TARGET}}))
    return path
