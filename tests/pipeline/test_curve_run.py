"""``budget.curve`` through a whole run: anchors searched and nested, a profile per grid budget,
the curve file, the comparison at every grid budget, the exporters and the recipe's refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evolalloc.core.allocation_file import load_allocation
from evolalloc.core.curve import CURVE_FILE, ProfileCurve, bounded_budgets
from evolalloc.core.errors import UserError

from .test_pipeline import evolalloc, tiny_recipe


def _records(folder):
    from evolalloc.search.loop import open_search

    opened = open_search(folder)
    try:
        return opened.store.records()
    finally:
        opened.store.close()


CURVE = {"target": 24, "curve": {"low": 0.5, "high": 2.0, "points": 5}}  # grid 12, 17, 24, 34, 48


def test_a_curve_run_ships_a_nested_profile_for_every_grid_budget(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.run import search_run
    from evolalloc.search.checkpoint import load_checkpoint

    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, budget=CURVE, baselines=["uniform", "pyramid"],
                                     optimizer={"name": "cma", "generations_per_group": 1}))
    assert recipe.budgets == [24, 12, 17, 34, 48]
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)

    curve = ProfileCurve.load(run / CURVE_FILE)
    assert curve.budgets == [12.0, 17.0, 24.0, 34.0, 48.0] and curve.anchors == [12.0, 24.0, 48.0]
    assert np.all(np.diff(curve.rows, axis=0) >= 0)  # no layer loses tokens as the budget grows
    profiles = {b: load_allocation(run / f"allocation-c{int(b)}.json") for b in curve.budgets}
    for budget, row in zip(curve.budgets, curve.rows):
        assert np.array_equal(profiles[budget].budgets, row)  # the files are the curve's rows
        assert profiles[budget].total == budget * 4 * 2 and profiles[budget].target == budget  # exact totals
    assert profiles[17.0].provenance["curve"]["role"] == "derived"
    assert profiles[17.0].provenance["curve"]["between"] == [12.0, 24.0]
    assert not {"fitness", "task_score", "evaluations"} & set(profiles[17.0].provenance)  # no search scored this row
    # Each other anchor is its own search, and its profile is exactly what that search scored best.
    for budget, below, above in ((48.0, profiles[24.0].budgets, None), (12.0, None, profiles[24.0].budgets)):
        folder = run / "curve" / f"c{int(budget)}"
        assert profiles[budget].provenance["curve"] == {"role": "anchor", "search": f"curve/c{int(budget)}",
                                                        "study": f"tiny-curve-c{int(budget)}"}
        best = max((t for t in _records(folder) if t.fitness is not None), key=lambda t: t.fitness)
        assert profiles[budget].provenance["fitness"] == pytest.approx(best.fitness)
        space = load_checkpoint(folder).config.build_space()
        decoded = np.asarray(best.budgets)  # the whole candidate allocation, as the search decoded it
        lo = below if below is not None else np.full((4, 2), 8)  # the window of 8 tokens the scorer always keeps
        hi = above if above is not None else np.maximum(np.full((4, 2), int(np.ceil(space.ratio_bounds[1] * budget))),
                                                        below)
        assert np.array_equal(profiles[budget].budgets, bounded_budgets(decoded, budget, "layer", lo, hi))

    rows = json.loads((run / "comparison.json").read_text())["rows"]
    budgets = {method: sorted(r["budget"] for r in rows if r["method"] == method)
               for method in ("evolved", "uniform", "pyramid")}
    assert all(value == [12.0, 17.0, 24.0, 34.0, 48.0] for value in budgets.values())
    assert (run / "score-vs-budget.png").is_file()
    assert "| curve | 5 budgets from 0.5c to 2c, anchors the ends and c searched" in (run / "report.md").read_text()
    shown = evolalloc("show", str(run), cwd=tmp_path).stdout
    assert "c = 17 (allocation-c17.json): " in shown and "curve: interpolated between the anchors at 12 and 24" in shown
    assert "curve anchor searched in curve/c48" in shown

    # Resume after losing the shipped files: the anchor searches are replayed from their stores
    # (no new evaluation) and give the same profiles.
    from evolalloc.pipeline.run import resume_run

    trials = {b: len(_records(run / "curve" / f"c{b}")) for b in (12, 48)}
    for name in (CURVE_FILE, "allocation-c17.json", "allocation-c48.json", "comparison.json", "report.md"):
        (run / name).unlink()
    resume_run(run, progress=False)
    assert {b: len(_records(run / "curve" / f"c{b}")) for b in (12, 48)} == trials
    assert np.array_equal(ProfileCurve.load(run / CURVE_FILE).rows, curve.rows)

    # The exporters take the run's curve: its rows, not one profile rescaled.
    out = evolalloc("export", str(run / "allocation-c24.json"), "--format", "curve", "--family", str(run / CURVE_FILE),
                    "--targets", "12,17,24,34,48", "-o", str(tmp_path / "family.npy"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert np.array_equal(np.load(tmp_path / "family.npy"), curve.rows)
    meta = json.loads((tmp_path / "family.json").read_text())
    assert meta["anchors"] == [12.0, 24.0, 48.0] and meta["outside_curve"] == []
    out = evolalloc("export", str(run / "allocation-c24.json"), "--format", "lukv", "--family", str(run / CURVE_FILE),
                    "--context-length", "60", "-o", str(tmp_path / "lukv.npy"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    kept = np.round((1 - np.load(tmp_path / "lukv.npy").astype(np.float64)) * 60).astype(np.int64)
    targets = json.loads((tmp_path / "lukv.json").read_text())["targets"]
    row = targets.index(24.0)  # ratio 0.6 of 60 tokens: the searched profile itself
    assert np.array_equal(kept[row], profiles[24.0].budgets)
    assert np.all(np.diff(kept[::-1], axis=0) >= 0)  # rows ascend in compression: kept tokens never grow


def test_a_curve_recipe_is_refused_with_the_field_named(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe

    cases = [
        ({"target": 24, "expansions": [48], "curve": {}}, "budget.expansions: give either expansions or curve"),
        ({"target": 24, "curve": {"points": 2}}, "budget.curve.points"),
        ({"target": 24, "curve": {"low": 1.5}}, "budget.curve.low: must be below 1"),
        ({"target": 24, "curve": {"anchors": [13]}}, "budget.curve.anchors[0]: 13 is not on the grid"),
        ({"target": 4, "curve": {"points": 9, "low": 0.5, "high": 1.0}}, "round to only"),
    ]
    for budget, message in cases:
        with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]")):
            load_recipe(tiny_recipe(tmp_path, tiny_model_dir, budget=budget))


def test_an_anchor_below_the_scorers_floor_is_refused_before_the_run_folder_exists(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.start import prepare_run

    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir,
                                     budget={"target": 24, "curve": {"low": 0.25, "high": 2.0}}))
    with pytest.raises(UserError, match="budget.curve.low: the anchor at c=6 is below the 8 tokens"):
        prepare_run(recipe, tmp_path / "runs", progress=False)
    assert not (tmp_path / "runs" / "tiny").exists()
