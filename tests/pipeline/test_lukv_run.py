"""``lukv`` through a whole run and the commands around it: the recipe's baselines, the run folder's
curves, the comparison and report, ``evaluate`` and ``export --format lukv``."""

from __future__ import annotations

import json

import numpy as np

from evolalloc.core.baselines.lukv import CURVES_FILE, UtilityCurves

from .test_pipeline import evolalloc, tiny_recipe


def test_a_run_with_lukv_profiles_it_compares_it_and_exports_its_curves(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.run import search_run

    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, baselines=["uniform", "lukv"],
                                     optimizer={"name": "cma", "generations_per_group": 1}))
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)
    curves = UtilityCurves.load(run / CURVES_FILE)
    assert curves.utility.shape[:2] == (4, 2) and curves.meta["split"] == "search" and curves.meta["instances"] == 2
    rows = json.loads((run / "comparison.json").read_text())["rows"]
    assert {(row["method"], row["budget"]) for row in rows
            if row["method"] == "lukv"} == {("lukv", 24.0), ("lukv", 48.0)}
    assert "| lukv" in (run / "report.md").read_text()

    scored = evolalloc("evaluate", "lukv", "--run", str(run), "--budget", "32", "--quiet", "--no-progress",
                       cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    assert "lukv (c = 32, scorer snapkv) on passkey/heldout: mean" in scored.stdout

    exported = evolalloc("export", str(run / "allocation-c24.json"), "--format", "lukv", "--context-length", "200",
                         "--curves", str(run / CURVES_FILE), "-o", str(tmp_path / "lukv.npy"), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    array = np.load(tmp_path / "lukv.npy")
    assert array.shape == (99, 4, 2) and array.dtype == np.float32
    # Every row keeps more of the prompt than the next: the curves hold for every ratio.
    kept = (1 - array).sum(axis=(1, 2))
    assert np.all(np.diff(kept) < 0)

    refused = evolalloc("export", str(run / "allocation-c24.json"), "--format", "lukv", cwd=tmp_path)
    assert refused.returncode == 2 and "context_length" in refused.stderr and "Traceback" not in refused.stderr
