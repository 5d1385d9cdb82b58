"""Expansion rule ``topup`` through a run: the recipe asks for it (gates only), the shipped
expansion records ``gate_floors`` at ``floor_fraction = c / c'``, and that file alone re-scores
what the run's comparison measured (ship -> evaluate round trip)."""

from __future__ import annotations

import json

import pytest
import yaml

from evolalloc.core.allocation_file import load_allocation
from evolalloc.core.composition import allocation_adapter
from evolalloc.core.errors import UserError
from tests.clitools import run_cli
from tests.pipeline.test_hybrid import TARGET, home, hybrid_recipe  # noqa: F401 (home: a fixture)


def topup_recipe(model_dir, rule="topup", **changes):
    return hybrid_recipe(model_dir, **{"search_space": {"name": "layer_groups", "group_size": 4},
                                       "budget": {"target": TARGET, "expansions": [2 * TARGET], "expansion_rule": rule},
                                       **changes})


@pytest.mark.parametrize("rule", ["topup", "search"])
def test_a_topup_expansion_ships_its_floors_and_the_file_reproduces_its_score(home, tiny_model_dir, tmp_path, rule):
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.run import search_run

    recipe = topup_recipe(tiny_model_dir, rule=rule)
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)
    searched = load_allocation(run / f"allocation-c{TARGET}.json")
    expanded = load_allocation(run / f"allocation-c{2 * TARGET}.json")
    assert allocation_adapter(searched) is None  # the searched profile itself stays static
    if rule == "search":  # topup was a candidate, scored on the search split like the others
        scores = expanded.provenance["expansion_search_scores"]
        # and so were the search's start methods at c' (optimizer.start: best, the default)
        assert set(scores) == {"proportional", "additive", "topup", "start:uniform", "start:pyramid", "start:lukv"}
        if expanded.provenance["expansion_rule"] != "topup":
            return
    assert allocation_adapter(expanded) == ("gate_floors", {"floor_fraction": 0.5})
    assert expanded.total == 2 * TARGET * 4 * 2

    comparison = json.loads((run / "comparison.json").read_text())
    for budget in (TARGET, 2 * TARGET):
        row = next(r for r in comparison["rows"] if r["method"] == "evolved" and r["budget"] == budget)
        scored = run_cli("evaluate", str(run / f"allocation-c{budget}.json"), "--run", str(run), "--quiet",
                         "--no-progress")
        assert scored.code == 0, scored.stderr
        assert f"mean {row['score']['mean']:.3f}" in scored.stdout


@pytest.mark.parametrize("rule", ["topup", "topup-half"])
def test_topup_for_a_scorer_without_calibrated_scores_is_one_line_naming_the_field(home, tiny_model_dir, tmp_path,
                                                                                   rule):
    changes = {"scorer": {"name": "snapkv"}, "baselines": ["uniform"]}
    with pytest.raises(UserError) as caught:
        topup_recipe(tiny_model_dir, rule=rule, **changes)
    assert caught.value.field == "budget.expansion_rule" and "gates" in str(caught.value) and rule in str(caught.value)
    path = tmp_path / "r.yaml"
    data = topup_recipe(tiny_model_dir, rule="proportional", **changes).to_dict()
    data["budget"]["expansion_rule"] = rule
    path.write_text(yaml.safe_dump(data))
    refused = run_cli("search", str(path), "--runs-dir", str(tmp_path / "runs"))
    assert refused.code == 2 and len(refused.error_lines) == 1 and "budget.expansion_rule" in refused.stderr
    assert not (tmp_path / "runs").exists()


def test_expand_topup_refuses_a_snapkv_profile_in_one_line(tmp_path):
    import numpy as np

    from evolalloc.core.allocation import Allocation
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.core.geometry import ModelGeometry

    geometry = ModelGeometry(num_layers=2, num_query_heads=2, num_kv_heads=1, head_dim=8, max_positions=512)
    path = save_allocation(Allocation(model="m", geometry=geometry, target=20.0, budgets=np.array([[10], [30]]),
                                      provenance={"method": "evolved"}), tmp_path / "a.json")
    refused = run_cli("expand", str(path), "--to", "40", "--rule", "topup")
    assert refused.code == 2 and len(refused.error_lines) == 1 and "--rule" in refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_expand_topup_half_writes_half_floors_for_a_gates_profile(tmp_path):
    import numpy as np

    from evolalloc.core.allocation import Allocation
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.core.geometry import ModelGeometry

    geometry = ModelGeometry(num_layers=2, num_query_heads=2, num_kv_heads=1, head_dim=8, max_positions=512)
    path = save_allocation(Allocation(model="m", geometry=geometry, scorer="gates", target=40.0,
                                      budgets=np.array([[30], [50]]), provenance={"method": "evolved"}),
                           tmp_path / "a.json")
    done = run_cli("expand", str(path), "--to", "64", "--rule", "topup-half")
    assert done.code == 0, done.stderr
    expanded = load_allocation(tmp_path / "allocation-c64.json")
    assert allocation_adapter(expanded) == ("gate_floors", {"floor_fraction": 40 / 128})
    assert expanded.provenance["expansion_rule"] == "topup-half" and expanded.total == 128
