"""The floors blend (``gate_floors``) through the group-wise loop: the recipe's ``floor_fraction`` reaches the
search's adapter and the shipped file (``provenance.adapter_params``), and the file alone re-runs it as searched."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import load_allocation, save_allocation
from evolalloc.core.composition import allocation_adapter
from evolalloc.core.errors import UserError
from evolalloc.pipeline.experiment import Experiment
from evolalloc.runtime.adaptive import Adapted
from tests.clitools import run_cli
from tests.pipeline.test_hybrid import TARGET, home, hybrid_recipe, likelihood  # noqa: F401 (home: a fixture)

FRACTION = 0.25


def floors_recipe(model_dir, **changes):
    return hybrid_recipe(model_dir, **{"search_space": {"name": "gate_floors", "group_size": 4,
                                                        "floor_fraction": FRACTION}, **changes})


def test_a_floors_run_ships_its_adapter_and_fraction_and_the_file_reproduces_its_score(home, tiny_model_dir, tmp_path):
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.run import search_run

    recipe = floors_recipe(tiny_model_dir)
    with Experiment(recipe, progress=False) as experiment:
        searching = experiment.search_scorer
        assert isinstance(searching, Adapted) and searching.adapter.params() == {"floor_fraction": FRACTION}
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)
    path = run / f"allocation-c{TARGET}.json"
    raw = json.loads(path.read_text())["provenance"]
    assert raw["adapter"] == "gate_floors" and raw["adapter_params"] == {"floor_fraction": FRACTION}
    shipped = load_allocation(path)
    assert allocation_adapter(shipped) == ("gate_floors", {"floor_fraction": FRACTION})
    assert shipped.total == TARGET * 4 * 2
    expanded = load_allocation(run / f"allocation-c{2 * TARGET}.json")
    assert allocation_adapter(expanded) == ("gate_floors", {"floor_fraction": FRACTION})

    comparison = json.loads((run / "comparison.json").read_text())
    evolved = next(row for row in comparison["rows"] if row["method"] == "evolved" and row["budget"] == TARGET)
    scored = run_cli("evaluate", str(path), "--run", str(run), "--quiet", "--no-progress")
    assert scored.code == 0, scored.stderr
    assert f"mean {evolved['score']['mean']:.3f}" in scored.stdout

    with Experiment(floors_recipe(tiny_model_dir), progress=False) as experiment:
        scorer = experiment.scorer_for(shipped)
        assert isinstance(scorer, Adapted) and scorer.adapter.params() == {"floor_fraction": FRACTION}
        # The fraction read from the file is the one that runs: another fraction scores otherwise.
        other = Allocation(model=shipped.model, geometry=shipped.geometry, scorer=shipped.scorer,
                           scorer_params=shipped.scorer_params, target=TARGET,
                           budgets=np.array([[20] * 2, [20] * 2, [20] * 2, [68] * 2]),
                           provenance={"method": "evolved", "adapter": "gate_floors",
                                       "adapter_params": {"floor_fraction": 1.0}})
        blended = Allocation(**{**other.__dict__,
                                "provenance": {**other.provenance, "adapter_params": {"floor_fraction": 0.0}}})
        assert likelihood(experiment, other) != likelihood(experiment, blended)
        reloaded = load_allocation(save_allocation(blended, tmp_path / "b.json"))
        assert likelihood(experiment, reloaded) == likelihood(experiment, blended)


@pytest.mark.parametrize("bad", [1.5, -0.25, "half"])
def test_a_bad_floor_fraction_in_a_recipe_is_one_line_naming_the_field(home, tiny_model_dir, tmp_path, bad):
    with pytest.raises(UserError) as caught:
        floors_recipe(tiny_model_dir, search_space={"name": "gate_floors", "floor_fraction": bad})
    assert caught.value.field == "search_space.floor_fraction"
    path = tmp_path / "r.yaml"
    data = floors_recipe(tiny_model_dir).to_dict()
    data["search_space"]["floor_fraction"] = bad
    path.write_text(yaml.safe_dump(data))
    refused = run_cli("search", str(path), "--runs-dir", str(tmp_path / "runs"))
    assert refused.code == 2 and len(refused.error_lines) == 1 and "search_space.floor_fraction" in refused.stderr
    assert not (tmp_path / "runs").exists()


def test_a_floor_fraction_for_a_space_without_floors_is_refused(home, tiny_model_dir):
    with pytest.raises(UserError) as caught:
        floors_recipe(tiny_model_dir, search_space={"name": "gate_prior", "floor_fraction": 0.5})
    assert caught.value.field == "search_space.floor_fraction" and "floors_under_global_topk" in str(caught.value)
