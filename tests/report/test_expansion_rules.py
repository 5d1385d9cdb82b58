"""benchmarks/expansion_rules.py: a finished run's profile carried by every rule that applies,
scored on its search split, the pick shipped as a run folder ``design_scores.py`` reads."""

from __future__ import annotations

import json

from evolalloc.core.allocation_file import load_allocation
from tests.pipeline.test_hybrid import TARGET, home  # noqa: F401 (home: a fixture)
from tests.pipeline.test_topup_run import topup_recipe
from tests.report.test_design_scores import benchmark_script


def script():
    return benchmark_script("expansion_rules")


def test_every_rule_is_scored_on_the_search_split_and_the_pick_is_shipped(home, tiny_model_dir, tmp_path, capsys):
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.run import search_run

    recipe = topup_recipe(tiny_model_dir, rule="proportional")
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)
    before = sorted(p.name for p in run.iterdir())
    out, ship = tmp_path / "rules.json", tmp_path / "ship"
    assert script().main([str(run), "--budgets", f"{2 * TARGET},{3 * TARGET}", "--ship", str(ship), "--out",
                          str(out)]) == 0
    scores = json.loads(out.read_text())[run.name]
    assert set(scores) == {str(2 * TARGET), str(3 * TARGET)}
    for budget, entry in scores.items():
        assert set(entry["fitness"]) == set(entry["accuracy"]) == {"proportional", "additive", "topup"}
        assert all(0.0 <= a <= 1.0 for a in entry["accuracy"].values())
        best = max(entry["fitness"].values())
        assert entry["picked"] == next(r for r in ("proportional", "additive", "topup") if entry["fitness"][r] == best)
        shipped = load_allocation(ship / run.name / f"allocation-c{budget}.json")
        assert shipped.provenance["expansion_rule"] == entry["picked"] and shipped.target == float(budget)
        assert (shipped.provenance.get("adapter") == "gate_floors") == (entry["picked"] == "topup")
    assert load_allocation(ship / run.name / f"allocation-c{TARGET}.json").budgets.tolist() == \
        load_allocation(run / f"allocation-c{TARGET}.json").budgets.tolist()
    assert sorted(p.name for p in run.iterdir()) == before  # the run folder is only read
    assert f"{run.name} c={2 * TARGET}: proportional fitness" in capsys.readouterr().out


def test_budgets_that_are_not_numbers_are_one_line_and_exit_2(tmp_path, capsys):
    assert script().main([str(tmp_path), "--budgets", "48,lots"]) == 2
    err = capsys.readouterr().err
    assert "--budgets" in err and len(err.strip().splitlines()) == 1
