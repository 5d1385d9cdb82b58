"""The ``full`` row: the uncompressed cache scored in the run's own comparison, on the same held-out prefill."""

from __future__ import annotations

import numpy as np

from evolalloc.core.allocation import Allocation
from evolalloc.core.baselines import default_baselines, make_baseline
from evolalloc.core.geometry import ModelGeometry
from evolalloc.pipeline.experiment import Experiment
from evolalloc.pipeline.record_bound import run_record_bound
from evolalloc.pipeline.run import compare
from tests.pipeline.test_competitors import recipe


def test_full_keeps_every_position_in_every_unit_at_any_target_and_a_window_in_a_windowed_layer():
    plain = ModelGeometry(num_layers=3, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=512)
    for target in (8, 64.5):
        assert (make_baseline("full").allocation(plain, target).budgets == 512).all()
    windowed = ModelGeometry(num_layers=2, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=512,
                             windows=(64, None))
    budgets = make_baseline("full").allocation(windowed, 8).budgets
    # the sliding layer holds what its window can use (W - 1 prompt tokens); the rest keeps every position
    assert budgets[0].tolist() == [63, 63] and (budgets[1] >= 512).all()
    assert "full" not in default_baselines()  # opt in: it makes the held-out records whole


def test_a_run_naming_full_keeps_whole_records_and_scores_the_full_cache_at_every_budget(tiny_model_dir, tmp_path):
    run = recipe(tiny_model_dir, ["uniform", "full"])
    with Experiment(run, progress=False) as experiment:
        geometry = experiment.geometry
        # b_max reaches the model's positions: the held-out records are whole, so no token is missing
        assert run_record_bound(experiment.resolved.budgets, experiment.search_config, experiment.resolved.baselines,
                                experiment.run.methods) == geometry.max_positions
        evolved = {b: Allocation(model="m", geometry=geometry, scorer="snapkv", scorer_params={"window": 8},
                                 target=b, budgets=np.full((geometry.num_layers, geometry.num_kv_heads), int(b)),
                                 provenance={"method": "evolved"}) for b in (24.0, 48.0)}
        rows, methods = compare(tmp_path, experiment, evolved)
        # the same scores as the full cache evaluated on its own (uniform at the model's positions)
        whole = experiment.baseline("uniform", geometry.max_positions)
        (alone,) = experiment.evaluator("heldout", experiment.scorer_for(whole), mode="generate").evaluate(
            [whole.budgets])
    full_rows = [r for r in rows if r.method == "full"]
    assert [r.budget for r in full_rows] == [24.0, 48.0]
    assert (methods["full"][24.0].budgets == geometry.max_positions).all()
    expected = float(np.mean([o.score for o in alone.instances]))
    assert all(abs(r.score.mean - expected) < 1e-12 for r in full_rows)


def test_a_search_with_the_full_row_reports_and_plots_it(tmp_path, tiny_model_dir):
    import json

    from tests.clitools import run_cli
    from tests.pipeline.test_pipeline import tiny_recipe

    path = tiny_recipe(tmp_path, tiny_model_dir, baselines=["uniform", "full"])
    result = run_cli("search", path, "--runs-dir", tmp_path / "runs", "--set", "engine.threads=1", "--no-progress")
    assert result.code == 0, result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    rows = json.loads((run / "comparison.json").read_text())["rows"]
    budgets = {method: {r["budget"] for r in rows if r["method"] == method} for method in ("full", "evolved")}
    assert budgets["full"] == budgets["evolved"] and budgets["full"]
    assert "full" in (run / "report.md").read_text() and (run / "score-vs-budget.png").is_file()
    shown = run_cli("show", run)
    assert shown.code == 0 and "full" in shown.stdout


def test_the_full_cache_is_decoded_once_for_every_budget_and_its_result_shared(tiny_model_dir, tmp_path,
                                                                                monkeypatch):
    from evolalloc.engine.local import LocalEvaluator

    decoded = []  # per evaluate call: how many of its budget arrays keep every position
    evaluate = LocalEvaluator.evaluate

    def counting(self, budgets):
        decoded.append(sum(int((np.asarray(b) >= self.loaded.geometry.max_positions).all()) for b in budgets))
        return evaluate(self, budgets)

    monkeypatch.setattr(LocalEvaluator, "evaluate", counting)
    run = recipe(tiny_model_dir, ["uniform", "full"])
    with Experiment(run, progress=False) as experiment:
        geometry = experiment.geometry
        evolved = {b: Allocation(model="m", geometry=geometry, scorer="snapkv", scorer_params={"window": 8},
                                 target=b, budgets=np.full((geometry.num_layers, geometry.num_kv_heads), int(b)),
                                 provenance={"method": "evolved"}) for b in (24.0, 48.0, 96.0)}
        decoded.clear()  # curation's judgments (the full cache too) are not the comparison's
        rows, _ = compare(tmp_path, experiment, evolved)
    assert sum(decoded) == 1  # three budgets, one full-cache decode of the held-out split
    full = {r.budget: r.score.mean for r in rows if r.method == "full"}
    assert sorted(full) == [24.0, 48.0, 96.0] and len(set(full.values())) == 1


def test_evaluate_distinct_evaluates_each_budget_array_once_and_answers_in_order():
    from evolalloc.pipeline.run import evaluate_distinct

    class Recording:
        def __init__(self):
            self.calls = []

        def evaluate(self, budgets):
            self.calls.append([int(b[0, 0]) for b in budgets])
            return [f"result of {int(b[0, 0])}" for b in budgets]

    geometry = ModelGeometry(num_layers=2, num_query_heads=2, num_kv_heads=1, head_dim=4, max_positions=64)

    def allocation(value):
        return Allocation(model="m", geometry=geometry, scorer="snapkv", scorer_params={}, target=float(value),
                          budgets=np.full((2, 1), value), provenance={"method": "uniform"})

    evaluator = Recording()
    results = evaluate_distinct(evaluator, [allocation(64), allocation(8), allocation(64), allocation(16)])
    assert evaluator.calls == [[64, 8, 16]]
    assert results == ["result of 64", "result of 8", "result of 64", "result of 16"]
